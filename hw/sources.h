// The `sources` object of a device config: one string per figure naming where it comes from
// (a datasheet, a paper's table, NeuroSim's Param.cpp). The strict reader refuses unknown
// fields, so the sources live beside the figures in the same file; a figure without a source,
// or a source for no figure, is an error naming "sources.<figure>".
#ifndef NEUPIMS_HW_SOURCES_H_
#define NEUPIMS_HW_SOURCES_H_

#include <string>
#include <vector>

#include "common/config_reader.h"

namespace neupims::hw {

void ReadSources(ConfigObject& root, const std::vector<std::string>& figures);

}  // namespace neupims::hw

#endif  // NEUPIMS_HW_SOURCES_H_
