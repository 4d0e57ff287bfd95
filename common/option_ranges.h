// One range per numeric option, shared by the CLI flags (tools/) and the config files (server/).
//
// A flag and the config field for the same option read their bounds from this table, so they
// cannot disagree (issue 17: `serve --speed 1e-300` was accepted on the command line although the
// server config enforced [1e-6, 1e9]). Every check refuses NaN and infinities.
#ifndef NEUPIMS_COMMON_OPTION_RANGES_H_
#define NEUPIMS_COMMON_OPTION_RANGES_H_

#include <string>

#include "common/config_reader.h"  // DoubleRange, IntRange

namespace neupims {

// "" when `value` is finite and inside `range`, else why not, e.g. "must be > 0",
// "must be in [1e-06, 1e+09]" or "must be a finite number".
std::string DoubleRangeProblem(double value, DoubleRange range);

namespace option_ranges {

// Link bandwidths (prefill KV link, TP/PP interconnect), GB/s: 1 MB/s to 1 PB/s.
inline constexpr DoubleRange kLinkGbps{.min = 1e-3, .max = 1e6};
// Device-to-device message latency, ns: up to one second.
inline constexpr DoubleRange kLinkLatencyNs{.min = 0, .max = 1e9};
// neupims-bench's per-request deadline (--timeout-s, 0: none) and its wait for the server
// (--connect-timeout-s), seconds: up to 1e6 s (11.6 days). Unbounded, 1e308 s overflowed the
// int64 nanoseconds of the deadline it becomes.
inline constexpr DoubleRange kRequestTimeoutS{.min = 0, .max = 1e6};
inline constexpr DoubleRange kConnectTimeoutS{.min = 0, .max = 1e6, .min_exclusive = true};
// neupims-bench's CNN mode: requests to send (as -n) and the open loop's Poisson rate,
// requests/s. A rate of 1e-308 made an infinite gap, converted to int64 nanoseconds.
inline constexpr IntRange kCnnRequests{.min = 1, .max = 100000000};
inline constexpr DoubleRange kCnnRateRps{.min = 1e-6, .max = 1e9};
// Realtime pacing: simulated seconds per wall second.
inline constexpr DoubleRange kSpeed{.min = 1e-6, .max = 1e9};
// Mean length of synthetic completions, tokens.
inline constexpr DoubleRange kMeanOutputTokens{.min = 1, .max = 1e6};
// Shutdown drain, seconds: up to a day.
inline constexpr DoubleRange kDrainTimeoutS{.min = 0, .max = 86400};
// Gamma shape of inter-arrival times.
inline constexpr DoubleRange kBurstiness{.min = 0, .max = 1e3, .min_exclusive = true};
// Tokens a gRPC stream may hold that its client has not taken yet (server --max-stream-buffer,
// config "max_stream_buffer"); 0: unbounded.
inline constexpr IntRange kMaxStreamBuffer{.min = 0, .max = int64_t{1} << 24};
// HTTP/2 streams per gRPC connection (SETTINGS_MAX_CONCURRENT_STREAMS is 31 bits).
inline constexpr IntRange kMaxConcurrentStreams{.min = 1, .max = (int64_t{1} << 31) - 1};
// Admission control: requests queued before RESOURCE_EXHAUSTED (serve --max-waiting, config
// "max_waiting"); 0: unbounded. 2^24 (16.8 M queued requests) is far past any real queue.
inline constexpr IntRange kMaxWaiting{.min = 0, .max = int64_t{1} << 24};
// Longest prompt accepted, tokens (serve --max-prompt-tokens, config "max_prompt_tokens"); 0: the
// model's context is the only limit. Bounded like --max-prefill-tokens (2^30).
inline constexpr IntRange kMaxPromptTokens{.min = 0, .max = int64_t{1} << 30};

// CNN partitioning: alpha of DONNA's eq. 1 (weight of time against energy).
inline constexpr DoubleRange kCnnAlpha{.min = 0, .max = 1};
// CNN requests: images per request (the input's batch dimension).
inline constexpr IntRange kCnnMaxBatch{.min = 1, .max = 4096};

}  // namespace option_ranges
}  // namespace neupims

#endif  // NEUPIMS_COMMON_OPTION_RANGES_H_
