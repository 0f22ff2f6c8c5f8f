/** `within`: a promise raced against a time limit whose timer ends with the race (agent/src/util/net.ts). */
import { describe, expect, it } from "vitest";
import { within } from "../../agent/src/util/net";

const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;

describe("within", () => {
  it("gives the promise's value and leaves no timer behind (a bare sleep in the race kept a finished CLI alive)", async () => {
    const before = timers();
    await expect(within(Promise.resolve(7), 60_000, () => new Error("late"))).resolves.toBe(7);
    expect(timers()).toBe(before);
  });
  it("rejects with late()'s error after the limit, or resolves undefined without one", async () => {
    const never = new Promise<number>(() => undefined);
    await expect(within(never, 20, () => new Error("did not start in 0.02 s"))).rejects.toThrow("did not start in 0.02 s");
    await expect(within(never, 20)).resolves.toBeUndefined();
  });
  it("passes the promise's own rejection through", async () => {
    await expect(within(Promise.reject(new Error("exited at start-up")), 60_000, () => new Error("late"))).rejects.toThrow("exited at start-up");
  });
});
