#include "hw/dram/command.h"

#include "absl/strings/str_format.h"

namespace neupims::hw {

const char* CommandName(CommandType t) {
  switch (t) {
    case CommandType::kAct:
      return "ACT";
    case CommandType::kPre:
      return "PRE";
    case CommandType::kRd:
      return "RD";
    case CommandType::kWr:
      return "WR";
    case CommandType::kRef:
      return "REF";
    case CommandType::kPimGwrite:
      return "PIM_GWRITE";
    case CommandType::kPimAct:
      return "PIM_ACTIVATION";
    case CommandType::kPimDot:
      return "PIM_DOTPRODUCT";
    case CommandType::kPimRdResult:
      return "PIM_RDRESULT";
    case CommandType::kPimHeader:
      return "PIM_HEADER";
    case CommandType::kPimGemv:
      return "PIM_GEMV";
    case CommandType::kPimPre:
      return "PIM_PRECHARGE";
  }
  return "?";
}

std::string Command::ToString() const {
  switch (type) {
    case CommandType::kAct:
    case CommandType::kPimGwrite:
      return absl::StrFormat("%s r%d bg%d b%d row%d", CommandName(type), rank, bank_group, bank,
                             row);
    case CommandType::kPre:
      return absl::StrFormat("%s r%d bg%d b%d", CommandName(type), rank, bank_group, bank);
    case CommandType::kRd:
    case CommandType::kWr:
      return absl::StrFormat("%s r%d bg%d b%d row%d col%d", CommandName(type), rank, bank_group,
                             bank, row, col);
    case CommandType::kRef:
      return absl::StrFormat("%s r%d", CommandName(type), rank);
    case CommandType::kPimAct:
      return absl::StrFormat("%s r%d bg%d row%d", CommandName(type), rank, bank_group, row);
    case CommandType::kPimGemv:
      return absl::StrFormat("%s k=%d", CommandName(type), steps);
    case CommandType::kPimHeader:
      return absl::StrFormat("%s tiles=%d", CommandName(type), steps);
    default:
      return CommandName(type);
  }
}

}  // namespace neupims::hw
