// agentd/audit/audit_record.cpp: kernel events as decision records.
#include <catch2/catch.hpp>

#include <climits>

#include "audit/audit_record.h"
#include "audit/run_context.h"

TEST_CASE("a ring-buffer event's return value is an errno only in the kernel's errno range", "[audit][record]") {
    // found by fuzz_ringbuf_event (UBSan: negating INT_MIN)
    bw_event ev{};
    ev.decision = BW_DECISION_DENY;
    bulwark::RunContext run;
    ev.ret = -13;
    CHECK(bulwark::audit::decision_from_event(ev, run, 0).err == 13);
    for (int ret : {INT_MIN, -4096, 0, 1, INT_MAX}) {
        ev.ret = ret;
        INFO("ret " << ret);
        CHECK(bulwark::audit::decision_from_event(ev, run, 0).err == 0);
    }
    ev.ret = -4095;
    CHECK(bulwark::audit::decision_from_event(ev, run, 0).err == 4095);
}
