// agentd/vm/channel: the microVM channel's frames, as either end reads them.
#include <catch2/catch.hpp>

#include <string>

#include "vm/channel.h"

using namespace bulwark::vm;

TEST_CASE("frames round-trip however the bytes are split", "[vm][channel]") {
    std::string bytes = encode(FrameType::Hello, R"({"kernel":"6.12"})") + encode(FrameType::Stdout, "out\n") +
                        encode(FrameType::Stderr, "") + encode(FrameType::Exit, "{}");
    for (size_t step : {size_t(1), size_t(3), size_t(7), bytes.size()}) {
        FrameReader r(from_guest);
        std::vector<Frame> got;
        for (size_t off = 0; off < bytes.size(); off += step) {
            r.feed(std::string_view(bytes).substr(off, step));
            for (;;) {
                auto f = r.next();
                REQUIRE(f);
                if (!*f) break;
                got.push_back(std::move(**f));
            }
        }
        REQUIRE(got.size() == 4);
        CHECK(got[0].type == FrameType::Hello);
        CHECK(got[0].payload == R"({"kernel":"6.12"})");
        CHECK(got[1].payload == "out\n");
        CHECK(got[2].type == FrameType::Stderr);
        CHECK(got[2].payload.empty());
        CHECK(got[3].type == FrameType::Exit);
        CHECK(r.buffered() == 0);
    }
}

TEST_CASE("each end accepts only the other end's frames", "[vm][channel]") {
    FrameReader host(from_guest);
    host.feed(encode(FrameType::Start, "{}"));
    auto f = host.next();
    REQUIRE_FALSE(f);
    CHECK(f.error().find("start") != std::string::npos);
    CHECK(f.error().find("not accepted") != std::string::npos);

    FrameReader guest(from_host);
    guest.feed(encode(FrameType::Stdout, "x"));
    CHECK_FALSE(guest.next());
    for (auto t : {FrameType::Start, FrameType::Stdin, FrameType::StdinEof, FrameType::Cancel, FrameType::Ack,
                   FrameType::Policy}) {
        CHECK(from_host(t));
        CHECK_FALSE(from_guest(t));
    }
    for (auto t : {FrameType::Hello, FrameType::Stdout, FrameType::Stderr, FrameType::Exit, FrameType::Record,
                   FrameType::Log, FrameType::PolicyApplied}) {
        CHECK(from_guest(t));
        CHECK_FALSE(from_host(t));
    }
}

TEST_CASE("garbage and oversized frames are protocol errors, and stay so", "[vm][channel]") {
    FrameReader r(from_guest);
    std::string big(4, '\0');
    uint32_t len = kMaxFrame + 2;
    for (int i = 0; i < 4; ++i) big[size_t(i)] = char((len >> (8 * i)) & 0xff);
    r.feed(big);
    auto f = r.next();
    REQUIRE_FALSE(f);
    CHECK(f.error().find("frame of") != std::string::npos);
    r.feed(encode(FrameType::Stdout, "later"));
    CHECK_FALSE(r.next());  // sticky: nothing after a protocol error is read

    FrameReader z(from_guest);
    z.feed(std::string(4, '\0'));  // a zero length: not even a type byte
    CHECK_FALSE(z.next());

    FrameReader u(from_guest);
    u.feed(std::string("\x01\x00\x00\x00\xee", 5));  // type 0xee
    auto e = u.next();
    REQUIRE_FALSE(e);
    CHECK(e.error().find("unknown") != std::string::npos);

    // A frame announced but not all there yet is no error: more bytes are needed.
    FrameReader p(from_guest);
    std::string part = encode(FrameType::Stdout, std::string(1000, 'a'));
    p.feed(part.substr(0, 500));
    auto n = p.next();
    REQUIRE(n);
    CHECK_FALSE(*n);
}
