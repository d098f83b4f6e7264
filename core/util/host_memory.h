// How much memory the host can still give: MemAvailable from /proc/meminfo.
#pragma once
#include <cstdint>

namespace remat {

// Bytes, 0 when unknown.
std::uint64_t host_memory_available();

}  // namespace remat
