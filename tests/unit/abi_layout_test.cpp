#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "bulwark/abi.h"

TEST_CASE("kernel device encoding differs from stat's st_dev", "[abi]") {
    struct stat st{};
    REQUIRE(::stat("/", &st) == 0);
    auto kdev = bulwark::abi::kernel_dev(major(st.st_dev), minor(st.st_dev));
    CHECK((kdev >> 20) == major(st.st_dev));
    CHECK((kdev & 0xfffff) == minor(st.st_dev));
    // 8:1 is 0x801 for stat() but 0x800001 for the kernel's s_dev.
    CHECK(bulwark::abi::kernel_dev(8, 1) == 0x800001ull);
    CHECK(makedev(8, 1) == 0x801ull);
}

TEST_CASE("every event fits the ring buffer record budget", "[abi]") {
    CHECK(sizeof(bw_event) <= 256);
    CHECK(BW_OP_MAX < 0xffff);
    CHECK(BW_PORT_RANGES_MAX * sizeof(bw_port_range) + 8 == sizeof(bw_net_rule));
}
