/**
 * A drill watcher of the leader's Redis keys: its own connection (one retry, short connect), and
 * `read()` sampled every `periodMs` into `samples` from `start()` to `stop()`; a failed read is
 * skipped. RepairWatch and RolloutWatch read their own keys through it.
 */
import { Redis } from "ioredis";
import { RedisKeys } from "../../../agent/src/fleet/redis/keys";
import { Loop } from "../../../agent/src/util/loop";
import type { ScenarioContext } from "./runner";

export abstract class KeySampler<S> {
  readonly samples: S[] = [];
  readonly redis: Redis;
  readonly keys: RedisKeys;
  private readonly loop: Loop;

  constructor(protected readonly ctx: ScenarioContext, periodMs: number) {
    this.redis = new Redis(ctx.stack.redis.url, { maxRetriesPerRequest: 1, connectTimeout: 1000 });
    this.redis.on("error", () => undefined);
    this.keys = new RedisKeys(ctx.stack.cluster);
    this.loop = new Loop(periodMs, async () => {
      const s = await this.read().catch(() => null);
      if (s) this.samples.push(s);
    }, () => undefined);
  }

  /** One sample now (on the drill's clock). */
  abstract read(): Promise<S>;

  start(): this {
    this.loop.start();
    return this;
  }

  async stop(): Promise<void> {
    this.loop.stop();
    this.redis.disconnect();
  }
}
