import table from "./prices.json";

/** One On-Demand price: where it came from and when. */
export interface Price {
  instanceType: string;
  region: string;
  /** USD per instance-hour (Linux, shared tenancy). */
  usdPerHour: number;
  /** `YYYY-MM-DD`: when the figure was read. */
  asOf: string;
  /** Where it was read (a URL, or `--price` for an override). */
  source: string;
  /** False when the figure was not read on AWS's own pricing page. */
  confirmed: boolean;
  note?: string;
}

export class PriceError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PriceError";
  }
}

/** The repository's table (infra/cost/prices.json), each entry checked so a bad edit fails loudly. */
export function priceTable(): Price[] {
  return table.entries.map((e, i) => {
    const at = `prices.json entries[${i}]`;
    if (!/^[a-z0-9-]+\.[a-z0-9]+$/.test(e.instanceType)) throw new PriceError(`${at}.instanceType ${JSON.stringify(e.instanceType)} is not an EC2 instance type`);
    if (!/^[a-z]{2}(-[a-z]+)+-\d$/.test(e.region)) throw new PriceError(`${at}.region ${JSON.stringify(e.region)} is not an AWS region`);
    if (!(e.usdPerHour > 0)) throw new PriceError(`${at}.usdPerHour must be a positive number`);
    if (!/^\d{4}-\d{2}-\d{2}$/.test(e.asOf)) throw new PriceError(`${at}.asOf must be YYYY-MM-DD`);
    if (!e.source) throw new PriceError(`${at}.source is required`);
    return { ...e };
  });
}

/** `--price p5.48xlarge=55.04`: a price for the stack's region, taken on the user's word. */
export function priceOverride(arg: string, region: string, today: Date): Price {
  const m = /^([a-z0-9-]+\.[a-z0-9]+)=(\d+(?:\.\d+)?)$/.exec(arg);
  if (!m || !(Number(m[2]) > 0)) throw new PriceError(`--price ${JSON.stringify(arg)}: expected INSTANCE_TYPE=USD_PER_HOUR, e.g. p5.48xlarge=55.04`);
  return { instanceType: m[1], region, usdPerHour: Number(m[2]), asOf: today.toISOString().slice(0, 10), source: "--price", confirmed: false };
}

/** The price of `instanceType` in `region`: an override first, then the table. */
export function findPrice(prices: readonly Price[], overrides: readonly Price[], instanceType: string, region: string): Price | undefined {
  const hit = (p: Price) => p.instanceType === instanceType && p.region === region;
  return overrides.find(hit) ?? prices.find(hit);
}
