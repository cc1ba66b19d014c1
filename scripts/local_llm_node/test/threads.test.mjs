import { test } from "node:test";
import assert from "node:assert/strict";
import { othersCores, sampleCpu, threadsFor } from "../lib/threads.mjs";

const opts = { cores: 2, threads: 2, busyThreads: 1 };

test("others' cores: the machine's busy time less this process's, over all of it", () => {
  // 200 ticks over 2 cores in the interval; 150 busy, 100 of them ours: others 0.5 cores.
  assert.equal(othersCores({ all: 0, busy: 0, mine: 0 }, { all: 200, busy: 150, mine: 100 }, 2), 0.5);
  assert.equal(othersCores({ all: 0, busy: 0, mine: 0 }, { all: 200, busy: 100, mine: 100 }, 2), 0);
  assert.equal(othersCores({ all: 5, busy: 0, mine: 0 }, { all: 5, busy: 0, mine: 0 }, 2), 0, "no time passed");
});

test("all threads on an idle machine, fewer when others take half a core, fewer without a sample", () => {
  const at = (all, busy, mine) => ({ all, busy, mine });
  assert.equal(threadsFor(at(0, 0, 0), at(200, 190, 180), opts), 2, "our own two threads are not others");
  assert.equal(threadsFor(at(0, 0, 0), at(200, 200, 100), opts), 1, "a build beside us");
  assert.equal(threadsFor(at(0, 0, 0), at(200, 49, 0), opts), 2);
  assert.equal(threadsFor(null, at(200, 0, 0), opts), 1);
  assert.equal(threadsFor(at(0, 0, 0), null, opts), 1);
});

test("a sample reads /proc/stat's first line and this process's utime and stime", () => {
  const files = {
    "/proc/stat": "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3\n",
    "/proc/self/stat": "42 (node (a) b) S 1 2 3 4 5 6 7 8 9 10 30 12 0 0 20 0",
  };
  assert.deepEqual(sampleCpu((p) => files[p]), { all: 1000, busy: 150, mine: 42 });
  assert.equal(sampleCpu(() => { throw new Error("no /proc"); }), null);
});
