/**
 * The cloud stand-ins of the actuator suites (STYLE.md rule 9: the only stand-ins are for
 * hardware and cloud): aws-sdk-client-mock stubs of the two SDK clients, backed by a tiny
 * in-memory Auto Scaling and ARC so that repeats see what the first call changed.
 * Every client points at a closed loopback port with fake credentials, so a command a test
 * forgot to stub fails locally instead of reaching AWS.
 */
import {
  AutoScalingClient,
  AutoScalingServiceException,
  CreateOrUpdateTagsCommand,
  DeleteTagsCommand,
  DescribeAutoScalingGroupsCommand,
  DescribeScalingActivitiesCommand,
  DescribeScheduledActionsCommand,
  ResumeProcessesCommand,
  SuspendProcessesCommand,
  UpdateAutoScalingGroupCommand,
  type Activity,
  type AutoScalingGroup,
  type ScheduledUpdateGroupAction,
} from "@aws-sdk/client-auto-scaling";
import { mockClient } from "aws-sdk-client-mock";
import {
  ARCZonalShiftClient,
  CancelZonalShiftCommand,
  GetManagedResourceCommand,
  ListZonalShiftsCommand,
  StartZonalShiftCommand,
  UpdateZonalShiftCommand,
  type ZonalShiftSummary,
} from "../../agent/src/fleet/actuators/arc-zonal-shift";

export const REGION = "us-east-1";
export const FAKE_CREDENTIALS = Object.freeze({ accessKeyId: "AKIDLLMHATEST", secretAccessKey: "llm-ha-test-secret" });
/** Nothing listens on the discard port: an unstubbed call fails with ECONNREFUSED at once. */
const NOWHERE = "http://127.0.0.1:9";

export const NLB_A = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/l1-us-east-1a/0123456789abcdef";
export const NLB_C = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/l1-us-east-1c/fedcba9876543210";
export const AZ_IDS = Object.freeze({ "us-east-1a": "use1-az1", "us-east-1b": "use1-az2", "us-east-1c": "use1-az4" });

export function autoScalingClient(): AutoScalingClient {
  return new AutoScalingClient({ region: REGION, credentials: FAKE_CREDENTIALS, endpoint: NOWHERE, maxAttempts: 1 });
}

export function arcClient(): ARCZonalShiftClient {
  return new ARCZonalShiftClient({ region: REGION, credentials: FAKE_CREDENTIALS, endpoint: NOWHERE, maxAttempts: 1, requestTimeoutMs: 1000 });
}

export const asgMock = mockClient(AutoScalingClient);
export const arcMock = mockClient(ARCZonalShiftClient);

/** `Throttling` as Auto Scaling (a Query API) returns it. */
export function throttling(): AutoScalingServiceException {
  return new AutoScalingServiceException({ name: "Throttling", $fault: "client", $metadata: { httpStatusCode: 400 }, message: "Rate exceeded" });
}

export interface FakeGroup {
  min: number;
  max: number;
  desired: number;
  suspended: string[];
  tags: Record<string, string>;
  /** Its scheduled actions (the standby schedule), as DescribeScheduledActions lists them. */
  schedule: ScheduledUpdateGroupAction[];
  /**
   * What a raised desired capacity does: `instant` (default) — the instances are InService at
   * once; `pending` — they launch (Pending); `{ fail }` — every launch fails with that
   * recorded activity message (a capacity shortage, a quota, a launch template), as AWS
   * records it in DescribeScalingActivities.
   */
  launch: "instant" | "pending" | { fail: string };
  /** Instance lifecycle states, as DescribeAutoScalingGroups lists them. */
  instances: string[];
  /** Scaling activities, newest first. */
  activities: Activity[];
}

/** An in-memory Auto Scaling service behind `asgMock`. */
export class FakeAutoScaling {
  readonly groups = new Map<string, FakeGroup>();

  constructor() {
    asgMock.on(DescribeAutoScalingGroupsCommand).callsFake((input: { AutoScalingGroupNames?: string[] }) => ({
      AutoScalingGroups: (input.AutoScalingGroupNames ?? []).filter((n) => this.groups.has(n)).map((n) => this.describe(n)),
      $metadata: {},
    }));
    asgMock.on(CreateOrUpdateTagsCommand).callsFake((input: { Tags: { ResourceId: string; Key: string; Value: string }[] }) => {
      for (const t of input.Tags) this.group(t.ResourceId).tags[t.Key] = t.Value;
      return { $metadata: {} };
    });
    asgMock.on(DeleteTagsCommand).callsFake((input: { Tags: { ResourceId: string; Key: string }[] }) => {
      for (const t of input.Tags) delete this.group(t.ResourceId).tags[t.Key];
      return { $metadata: {} };
    });
    asgMock.on(SuspendProcessesCommand).callsFake((input: { AutoScalingGroupName: string; ScalingProcesses: string[] }) => {
      const g = this.group(input.AutoScalingGroupName);
      g.suspended = [...new Set([...g.suspended, ...input.ScalingProcesses])];
      return { $metadata: {} };
    });
    asgMock.on(ResumeProcessesCommand).callsFake((input: { AutoScalingGroupName: string; ScalingProcesses: string[] }) => {
      const g = this.group(input.AutoScalingGroupName);
      g.suspended = g.suspended.filter((p) => !input.ScalingProcesses.includes(p));
      return { $metadata: {} };
    });
    asgMock.on(DescribeScheduledActionsCommand).callsFake((input: { AutoScalingGroupName: string }) => ({
      ScheduledUpdateGroupActions: this.group(input.AutoScalingGroupName).schedule.map((a) => ({ AutoScalingGroupName: input.AutoScalingGroupName, ...a })),
      $metadata: {},
    }));
    asgMock.on(UpdateAutoScalingGroupCommand).callsFake((input: { AutoScalingGroupName: string; MinSize: number; MaxSize: number; DesiredCapacity: number }) => {
      const g = this.group(input.AutoScalingGroupName);
      Object.assign(g, { min: input.MinSize, max: input.MaxSize, desired: input.DesiredCapacity });
      this.launch(input.AutoScalingGroupName);
      return { $metadata: {} };
    });
    asgMock.on(DescribeScalingActivitiesCommand).callsFake((input: { AutoScalingGroupName: string; MaxRecords?: number }) => ({
      Activities: this.group(input.AutoScalingGroupName).activities.slice(0, input.MaxRecords ?? 100),
      $metadata: {},
    }));
  }

  /** Clock of the recorded activities. Default `Date.now`. */
  now: () => number = Date.now;

  /** Auto Scaling's answer to a desired capacity above the instance count. */
  launch(name: string): void {
    const g = this.group(name);
    const missing = g.desired - g.instances.length;
    if (missing <= 0) return;
    if (g.launch === "instant" || g.launch === "pending") {
      for (let i = 0; i < missing; i++) g.instances.push(g.launch === "instant" ? "InService" : "Pending");
      return;
    }
    this.recordFailure(name, g.launch.fail, g.instances.length, g.desired);
  }

  /** A failed launch as Auto Scaling records it (recorded shape of a real activity). */
  recordFailure(name: string, message: string, from: number, to: number): void {
    const g = this.group(name);
    const at = new Date(this.now());
    g.activities.unshift({
      ActivityId: `act-${g.activities.length + 1}`,
      AutoScalingGroupName: name,
      Description: `Launching a new EC2 instance.  Status Reason: ${message}`,
      Cause: `At ${at.toISOString().replace(/\.\d+Z$/, "Z")} an instance was started in response to a difference between desired and actual capacity, increasing the capacity from ${from} to ${to}.`,
      StartTime: at,
      EndTime: new Date(at.getTime() + 1000),
      StatusCode: "Failed",
      StatusMessage: message,
      Progress: 100,
      Details: JSON.stringify({ "Subnet ID": "subnet-0123456789abcdef0", "Availability Zone": "us-east-1c" }),
    });
  }

  add(name: string, g: Partial<FakeGroup> & Pick<FakeGroup, "min" | "max" | "desired">): this {
    this.groups.set(name, { suspended: [], tags: {}, schedule: [], launch: "instant", instances: [], activities: [], ...g });
    return this;
  }

  group(name: string): FakeGroup {
    const g = this.groups.get(name);
    if (!g) throw new AutoScalingServiceException({ name: "ValidationError", $fault: "client", $metadata: { httpStatusCode: 400 }, message: `no group ${name}` });
    return g;
  }

  private describe(name: string): AutoScalingGroup {
    const g = this.group(name);
    return {
      AutoScalingGroupName: name,
      MinSize: g.min,
      MaxSize: g.max,
      DesiredCapacity: g.desired,
      DefaultCooldown: 300,
      AvailabilityZones: ["us-east-1c"],
      HealthCheckType: "EC2",
      CreatedTime: new Date(0),
      Instances: g.instances.map((LifecycleState, i) => ({
        InstanceId: `i-0${name.length}${i}abcdef012345`,
        InstanceType: "p5.48xlarge",
        AvailabilityZone: "us-east-1c",
        LifecycleState: LifecycleState as "InService",
        HealthStatus: "Healthy",
        ProtectedFromScaleIn: false,
      })),
      SuspendedProcesses: g.suspended.map((p) => ({ ProcessName: p, SuspensionReason: "User suspended" })),
      Tags: Object.entries(g.tags).map(([Key, Value]) => ({ ResourceId: name, ResourceType: "auto-scaling-group", Key, Value, PropagateAtLaunch: false })),
    };
  }
}

/** An in-memory ARC behind `arcMock`: load balancers with their AZ ids and the shifts on them. */
export class FakeArc {
  readonly shifts: ZonalShiftSummary[] = [];
  private next = 1;

  constructor(
    private readonly placement: Record<string, string[]>,
    private readonly now: () => number,
  ) {
    arcMock.on(GetManagedResourceCommand).callsFake((input: { resourceIdentifier: string }) => ({
      arn: input.resourceIdentifier,
      appliedWeights: Object.fromEntries((this.placement[input.resourceIdentifier] ?? []).map((id) => [id, 1])),
      zonalShifts: [],
      $metadata: {},
    }));
    arcMock.on(ListZonalShiftsCommand).callsFake((input: { resourceIdentifier?: string; status?: string }) => ({
      items: this.shifts.filter((s) => s.resourceIdentifier === input.resourceIdentifier && (!input.status || s.status === input.status)).map((s) => ({ ...s })),
      $metadata: {},
    }));
    arcMock.on(StartZonalShiftCommand).callsFake((input: { resourceIdentifier: string; awayFrom: string; expiresIn: string; comment: string }) => {
      const s = this.add({ resourceIdentifier: input.resourceIdentifier, awayFrom: input.awayFrom, comment: input.comment, expiresInMs: FakeArc.ms(input.expiresIn) });
      return { ...s, $metadata: {} };
    });
    arcMock.on(UpdateZonalShiftCommand).callsFake((input: { zonalShiftId: string; expiresIn?: string; comment?: string }) => {
      const s = this.find(input.zonalShiftId);
      if (input.expiresIn) s.expiryTime = new Date(this.now() + FakeArc.ms(input.expiresIn));
      if (input.comment !== undefined) s.comment = input.comment;
      return { ...s, $metadata: {} };
    });
    arcMock.on(CancelZonalShiftCommand).callsFake((input: { zonalShiftId: string }) => {
      const s = this.find(input.zonalShiftId);
      s.status = "CANCELED";
      return { ...s, $metadata: {} };
    });
  }

  static ms(expiresIn: string): number {
    const m = /^(\d+)([mh])$/.exec(expiresIn);
    if (!m) throw new Error(`bad expiresIn ${expiresIn}`);
    return Number(m[1]) * (m[2] === "h" ? 3_600_000 : 60_000);
  }

  add(s: { resourceIdentifier: string; awayFrom: string; comment: string; expiresInMs: number }): ZonalShiftSummary {
    const shift: ZonalShiftSummary = {
      zonalShiftId: `zs-${this.next++}`,
      resourceIdentifier: s.resourceIdentifier,
      awayFrom: s.awayFrom,
      comment: s.comment,
      status: "ACTIVE",
      startTime: new Date(this.now()),
      expiryTime: new Date(this.now() + s.expiresInMs),
    };
    this.shifts.push(shift);
    return shift;
  }

  private find(id: string): ZonalShiftSummary {
    const s = this.shifts.find((x) => x.zonalShiftId === id);
    if (!s) throw new Error(`no shift ${id}`);
    return s;
  }
}

/** `[command name, input]` of every call a mock received, in order. */
export function sent(mock: typeof asgMock | typeof arcMock): [string, unknown][] {
  return mock.calls().map((c) => [c.args[0].constructor.name, c.args[0].input]);
}
