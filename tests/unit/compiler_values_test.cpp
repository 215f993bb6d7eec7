#include "compiler_support.h"

#include "bulwark/policy/values.h"

using namespace bulwark::policy;

TEST_CASE("paths are normalised or rejected", "[compiler][values]") {
    CHECK(normalise_path("/etc//ssl/./certs/").value() == "/etc/ssl/certs");
    CHECK(normalise_path("/").value() == "/");
    CHECK(normalise_path("//").value() == "/");
    CHECK(normalise_path("${workdir}/out/").value() == "${workdir}/out");
    CHECK(normalise_path("${workdir}").value() == "${workdir}");
    CHECK(normalise_path("/tmp/${task_id}/x").value() == "/tmp/${task_id}/x");
    CHECK_FALSE(normalise_path("etc/passwd"));
    CHECK_FALSE(normalise_path(""));
    CHECK_FALSE(normalise_path("/etc/../root"));
    CHECK_FALSE(normalise_path("/a/.."));
    CHECK_FALSE(normalise_path("${workdir}x"));
    CHECK_FALSE(normalise_path("/x/${home}"));
    CHECK_FALSE(normalise_path("${nope}/x"));
    CHECK_FALSE(normalise_path("/home/*/.ssh"));
    CHECK_FALSE(normalise_path("/a\nb"));
    CHECK(normalise_path("/" + std::string(255, 'a')).has_value());
    CHECK_FALSE(normalise_path("/" + std::string(256, 'a')));
    std::string long_path;
    while (long_path.size() <= 4096) long_path += "/abcdefgh";
    CHECK_FALSE(normalise_path(long_path));
    CHECK(normalise_path(long_path).error().find("limit is 4096") != std::string::npos);
}

TEST_CASE("path coverage follows components, not string prefixes", "[compiler][values]") {
    CHECK(path_covers("/etc", "/etc/ssl"));
    CHECK(path_covers("/etc", "/etc"));
    CHECK_FALSE(path_covers("/etc", "/etcx"));
    CHECK(path_covers("/", "${home}/.ssh"));
    CHECK(path_covers("${home}", "${home}/.ssh"));
    CHECK_FALSE(path_covers("${home}", "${homework}"));
    CHECK_FALSE(path_covers("/home", "${home}/.ssh"));
}

TEST_CASE("CIDRs and addresses parse strictly into the v6 space", "[compiler][values]") {
    auto c = parse_cidr("10.20.0.0/16").value();
    CHECK(c.prefix == 96 + 16);
    CHECK(c.v4);
    CHECK(c.addr[10] == 0xff);
    CHECK(c.addr[11] == 0xff);
    CHECK(c.addr[12] == 10);
    CHECK(c.addr[13] == 20);
    CHECK(format_cidr(c.addr, c.prefix) == "10.20.0.0/16");
    CHECK(parse_cidr("0.0.0.0/0").value().prefix == 96);
    CHECK(parse_cidr("::/0").value().prefix == 0);
    CHECK(parse_cidr("2001:db8::/32").value().prefix == 32);
    CHECK(parse_cidr("1.2.3.4").value().prefix == 128);
    // The v4-mapped spelling of a v4 network lands on the same key.
    CHECK(parse_cidr("::ffff:10.20.0.0/112").value().addr == c.addr);
    for (const char* bad : {"10.0.0.1/33", "1.2.3", "010.0.0.1", "10.0.0.256", "10.0.0.1/", "10.0.0.1/-1",
                            "10.0.0.1/08", "1.2.3.4.5", "a.b.c.d", "10.0.0.0/8x", "2001:db8::/129",
                            "fe80::1%eth0", "::1::2", "10.0.0.1/8", "", "0x7f.0.0.1", " 10.0.0.1"}) {
        INFO(bad);
        CHECK_FALSE(parse_cidr(bad));
    }
    CHECK(parse_cidr("10.0.0.1/8").error().find("10.0.0.0/8") != std::string::npos);
    CHECK(cidr_contains(parse_cidr("10.0.0.0/8").value(), parse_cidr("10.1.0.0/16").value()));
    CHECK_FALSE(cidr_contains(parse_cidr("10.1.0.0/16").value(), parse_cidr("10.0.0.0/8").value()));
    CHECK(cidr_contains(parse_cidr("::/0").value(), parse_cidr("10.0.0.0/8").value()));
}

TEST_CASE("host names follow RFC 1123", "[compiler][values]") {
    CHECK(validate_hostname("API.GitHub.com.").value() == "api.github.com");
    CHECK(validate_hostname("a-b.example").has_value());
    for (const char* bad : {"", "-a.com", "a-.com", "a..b", "*.github.com", "a_b.com", "1.2.3", "1.2.3.4",
                            "host.123", "::1"}) {
        INFO(bad);
        CHECK_FALSE(validate_hostname(bad));
    }
    CHECK_FALSE(validate_hostname(std::string(64, 'a') + ".com"));
    std::string long_host;
    for (int i = 0; i < 51; ++i) long_host += "abcd.";
    CHECK_FALSE(validate_hostname(long_host + "com"));
}

TEST_CASE("ports never wrap around", "[compiler][values]") {
    CHECK(parse_port_range("443").value().lo == 443);
    auto r = parse_port_range("8000-8080").value();
    CHECK((r.lo == 8000 && r.hi == 8080));
    CHECK(parse_port_range("65535").has_value());
    for (const char* bad : {"65536", "70000", "-1", "+80", "080", "1e3", "0x50", "80-70", "80-", "-80", "", "https",
                            "99999999999999999999999", "4294967297"}) {
        INFO(bad);
        CHECK_FALSE(parse_port_range(bad));
    }
}

TEST_CASE("sizes, durations and percentages fit their fields", "[compiler][values]") {
    CHECK(parse_size("256MiB").value() == 256ull << 20);
    CHECK(parse_size("1GB").value() == 1000000000ull);
    CHECK(parse_size("512B").value() == 512);
    CHECK(parse_size("16777215TiB").value() == 16777215ull << 40);
    CHECK_FALSE(parse_size("16777216TiB"));  // 2^64: overflow
    CHECK_FALSE(parse_size("18446744073709551616B"));
    CHECK_FALSE(parse_size("256"));
    CHECK_FALSE(parse_size("1.5GiB"));
    CHECK_FALSE(parse_size("256mib"));
    CHECK_FALSE(parse_size("-1MiB"));
    CHECK(parse_duration_ms("30s").value() == 30000);
    CHECK(parse_duration_ms("2h").value() == 7200000);
    CHECK(parse_duration_ms("250ms").value() == 250);
    CHECK_FALSE(parse_duration_ms("30"));
    CHECK_FALSE(parse_duration_ms("5000000000000000000h"));
    CHECK(parse_percent("50%").value() == 50);
    CHECK_FALSE(parse_percent("50"));
    CHECK_FALSE(parse_percent("5000000000%"));
}

TEST_CASE("UTF-8 validation is strict", "[compiler][values]") {
    CHECK(check_utf8("plain ascii").has_value());
    CHECK(check_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80").has_value());
    CHECK(check_utf8("ab\xff").error() == 2);
    CHECK_FALSE(check_utf8("\xc0\xaf"));          // overlong '/'
    CHECK_FALSE(check_utf8("\xed\xa0\x80"));      // surrogate
    CHECK_FALSE(check_utf8("\xf4\x90\x80\x80"));  // > U+10FFFF
    CHECK_FALSE(check_utf8("\xe2\x82"));          // truncated
}
