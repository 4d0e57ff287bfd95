// DRAM and PIM commands of one HBM-PIM channel.
//
// Standard commands: ACT, PRE, RD, WR, REF.
// Newton PIM command set [He et al., MICRO'20; NeuPIMs sec. 5.2]:
//   PIM_GWRITE      copy one page of a bank into the channel's global vector buffer
//   PIM_ACTIVATION  grouped activation: open the same row in every bank of one bank group
//   PIM_DOTPRODUCT  every bank multiplies one column of its open row with the global buffer
//   PIM_RDRESULT    read the per-bank accumulators (one burst) and clear them
// NeuPIMs additions (Table 1):
//   PIM_HEADER      announce a GEMV (its tile count and shape) so the controller can plan refresh
//   PIM_GEMV(k)     composite: k column MAC steps, then return the result (one burst)
//   PIM_PRECHARGE   precharge the PIM row buffers (all banks)
//
// Which banks and which row buffer a command touches ("target"):
//   ACT/PRE/RD/WR ........ one bank, MEM row buffer
//   PIM_GWRITE ........... one bank, PIM row buffer (activates, streams the page, self-precharges)
//   PIM_ACTIVATION ....... one bank group of one rank, PIM row buffer
//   PIM_DOTPRODUCT/RDRESULT/GEMV/PRECHARGE ... every bank of the channel, PIM row buffer
//   REF .................. every bank of one rank, both row buffers
//   PIM_HEADER ........... the channel (no bank state)
// In single-row-buffer mode the "PIM row buffer" and the MEM row buffer are the same one.
#ifndef NEUPIMS_HW_DRAM_COMMAND_H_
#define NEUPIMS_HW_DRAM_COMMAND_H_

#include <array>
#include <cstdint>
#include <string>

#include "common/units.h"

namespace neupims::hw {

enum class CommandType : uint8_t {
  kAct,
  kPre,
  kRd,
  kWr,
  kRef,
  kPimGwrite,
  kPimAct,
  kPimDot,
  kPimRdResult,
  kPimHeader,
  kPimGemv,
  kPimPre,
};
inline constexpr int kNumCommandTypes = 12;

// Bit set of command types.
using CommandMask = uint32_t;
constexpr CommandMask Bit(CommandType t) { return CommandMask{1} << static_cast<int>(t); }

// Classes used by the timing rules.
inline constexpr CommandMask kActivateClass =
    Bit(CommandType::kAct) | Bit(CommandType::kPimAct) | Bit(CommandType::kPimGwrite);
inline constexpr CommandMask kPrechargeClass = Bit(CommandType::kPre) | Bit(CommandType::kPimPre);
inline constexpr CommandMask kPimColumnClass =
    Bit(CommandType::kPimDot) | Bit(CommandType::kPimRdResult) | Bit(CommandType::kPimGemv);
// HBM has separate row and column command buses; each carries one command per cycle.
inline constexpr CommandMask kRowBusClass =
    Bit(CommandType::kAct) | Bit(CommandType::kPre) | Bit(CommandType::kRef) |
    Bit(CommandType::kPimAct) | Bit(CommandType::kPimPre) | Bit(CommandType::kPimHeader);
inline constexpr CommandMask kColumnBusClass =
    Bit(CommandType::kRd) | Bit(CommandType::kWr) | Bit(CommandType::kPimGwrite) |
    Bit(CommandType::kPimDot) | Bit(CommandType::kPimRdResult) | Bit(CommandType::kPimGemv);

constexpr bool IsPim(CommandType t) {
  return static_cast<int>(t) >= static_cast<int>(CommandType::kPimGwrite);
}
constexpr bool InMask(CommandMask m, CommandType t) { return (m & Bit(t)) != 0; }

const char* CommandName(CommandType t);

// Per-type counters (commands issued, by type).
using CommandCounts = std::array<int64_t, kNumCommandTypes>;

struct Command {
  CommandType type = CommandType::kAct;
  int8_t rank = 0;
  int8_t bank_group = 0;  // within the rank
  int8_t bank = 0;        // within the bank group
  int32_t row = 0;
  int16_t col = 0;  // burst index within the row (RD/WR)
  // PIM_GEMV: column MAC steps before the result is returned. PIM_HEADER: tiles announced.
  int32_t steps = 0;

  std::string ToString() const;
};

// A command and the cycle it was issued: one line of a command trace.
struct IssuedCommand {
  Cycles cycle = 0;
  Command cmd;
};

}  // namespace neupims::hw

#endif  // NEUPIMS_HW_DRAM_COMMAND_H_
