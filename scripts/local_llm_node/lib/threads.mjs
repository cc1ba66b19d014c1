// How many threads llama.cpp may use, from how busy the rest of the machine
// is: all of them while it is otherwise idle, fewer while other processes
// take the cores.
//
// Why: llama.cpp's threads wait for each other by spinning. On a 2-core
// machine with builds running (load 10), two threads made one generated token
// take 18 s, one thread 0.1 s; on the idle machine two threads computed a
// prompt twice as fast as one (1 372 tokens: 16.1 s against 31.4 s) and
// generated 15 tokens/s against 9.5 at a 4.4k-token context (issue 31).
// node-llama-cpp allots threads per decoded batch (`llama.maxThreads`), so a
// change applies from the next token on.

import { readFileSync } from "node:fs";

/** A sample of the machine's CPU time and this process's, in clock ticks,
 * from /proc (null where there is none: the caller then stays careful). */
export function sampleCpu(read = (p) => readFileSync(p, "utf8")) {
  try {
    const cpu = read("/proc/stat").split("\n", 1)[0].trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal …: idle and iowait are not busy.
    const all = cpu.slice(0, 8).reduce((a, b) => a + b, 0);
    const busy = all - cpu[3] - (cpu[4] || 0);
    // /proc/self/stat: the fields after the command's closing parenthesis;
    // utime and stime are the 14th and 15th of the whole line.
    const self = read("/proc/self/stat");
    const rest = self.slice(self.lastIndexOf(")") + 2).split(" ");
    const mine = Number(rest[11]) + Number(rest[12]);
    if (![all, busy, mine].every(Number.isFinite)) return null;
    return { all, busy, mine };
  } catch {
    return null;
  }
}

/** The cores other processes used between two samples (0..cores). */
export function othersCores(prev, cur, cores) {
  const all = cur.all - prev.all;
  if (!(all > 0)) return 0;
  const others = cur.busy - prev.busy - (cur.mine - prev.mine);
  return Math.max(0, Math.min(cores, (others / all) * cores));
}

/** The threads to allow: `threads` while others use less than `threshold`
 * of a core, else `busyThreads`; `busyThreads` without a sample. */
export function threadsFor(prev, cur, { cores, threads, busyThreads, threshold = 0.5 }) {
  if (!prev || !cur) return busyThreads;
  return othersCores(prev, cur, cores) < threshold ? threads : busyThreads;
}
