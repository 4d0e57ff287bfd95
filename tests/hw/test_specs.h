// Shared fixtures for the hw tests: the Table 2 HBM2-PIM spec built in code (tests must not
// depend on config files), in both row-buffer modes and command sets.
#ifndef NEUPIMS_TESTS_HW_TEST_SPECS_H_
#define NEUPIMS_TESTS_HW_TEST_SPECS_H_

#include "hw/dram/hbm_spec.h"

namespace neupims::hw::testing {

// Defaults of HbmSpec are NeuPIMs Table 2 (+ the DRAMsim3 HBM2 values Table 2 leaves out).
inline HbmSpec NeuPimsSpec() {
  HbmSpec s;
  s.pim.row_buffers = RowBufferMode::kDual;
  s.pim.command_set = PimCommandSet::kNeuPims;
  return s;
}

inline HbmSpec NewtonSpec() {
  HbmSpec s;
  s.pim.row_buffers = RowBufferMode::kSingle;
  s.pim.command_set = PimCommandSet::kNewton;
  return s;
}

inline HbmSpec Spec(RowBufferMode rb, PimCommandSet cs) {
  HbmSpec s;
  s.pim.row_buffers = rb;
  s.pim.command_set = cs;
  return s;
}

}  // namespace neupims::hw::testing

#endif  // NEUPIMS_TESTS_HW_TEST_SPECS_H_
