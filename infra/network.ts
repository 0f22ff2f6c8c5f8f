import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { Problems } from "./problems";
import { tagged } from "./tags";

export interface NetworkArgs {
  /** Availability zones, at least 2. Required. */
  azs: string[];
  /** VPC CIDR, a /16 to /20. Default `10.0.0.0/16`. */
  cidr?: string;
  /** One NAT gateway per AZ (an AZ outage cannot cut the others' egress). Default true; false = one NAT (dev). */
  natPerAz?: boolean;
  /** Cluster name, for the subnet discovery tags of the load balancer controller. Required. */
  clusterName: string;
  /** Region of the VPC endpoints' service names. Required. */
  region: string;
}

/** One AZ's subnets. */
export interface AzSubnets {
  az: string;
  publicSubnet: aws.ec2.Subnet;
  privateSubnet: aws.ec2.Subnet;
}

/** Splits `cidr` into 2^newBits subnets and returns the `index`-th. */
export function subnetCidr(cidr: string, newBits: number, index: number): string {
  const [addr, lenStr] = cidr.split("/");
  const len = Number(lenStr) + newBits;
  const base = addr.split(".").reduce((a, o) => a * 256 + Number(o), 0);
  const ip = base + index * 2 ** (32 - len);
  return `${[24, 16, 8, 0].map((s) => Math.floor(ip / 2 ** s) % 256).join(".")}/${len}`;
}

/** The public subnets' CIDRs, AZ by AZ (the NLBs' addresses: their health checks come from there). */
export function publicSubnetCidrs(cidr: string, azs: number): string[] {
  return Array.from({ length: azs }, (_, i) => subnetCidr(cidr, 8, 240 + i));
}

/**
 * A VPC over the given AZs: a public and a private subnet per AZ, NAT per AZ (or one),
 * and endpoints so that image pulls and STS calls stay inside the VPC.
 */
export class Network extends pulumi.ComponentResource {
  readonly vpc: aws.ec2.Vpc;
  readonly subnets: AzSubnets[];
  readonly privateSubnetIds: pulumi.Output<string>[];

  constructor(name: string, args: NetworkArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:Network", name, {}, opts);
    const r = createNetwork(name, args, this);
    this.vpc = r.vpc;
    this.subnets = r.subnets;
    this.privateSubnetIds = r.subnets.map((s) => s.privateSubnet.id);
    this.registerOutputs({ vpcId: this.vpc.id, privateSubnetIds: this.privateSubnetIds });
  }
}

function validate(args: NetworkArgs): void {
  const p = new Problems();
  if (args.azs.length < 2) p.add("azs", "needs at least 2 availability zones");
  const len = Number((args.cidr ?? "10.0.0.0/16").split("/")[1]);
  if (!(len >= 16 && len <= 20)) p.add("cidr", "must be a /16 to /20");
  p.throwIfAny("Network arguments");
}

export function createNetwork(name: string, args: NetworkArgs, parent: pulumi.Resource): { vpc: aws.ec2.Vpc; subnets: AzSubnets[] } {
  validate(args);
  const cidr = args.cidr ?? "10.0.0.0/16";
  const opts = { parent };
  const clusterTag = { [`kubernetes.io/cluster/${args.clusterName}`]: "shared" };
  const vpc = new aws.ec2.Vpc(`${name}-vpc`, { cidrBlock: cidr, enableDnsHostnames: true, enableDnsSupport: true, tags: tagged({ Name: name }) }, opts);
  const igw = new aws.ec2.InternetGateway(`${name}-igw`, { vpcId: vpc.id, tags: tagged({ Name: name }) }, opts);
  const publicRt = new aws.ec2.RouteTable(`${name}-public-rt`, { vpcId: vpc.id, routes: [{ cidrBlock: "0.0.0.0/0", gatewayId: igw.id }], tags: tagged() }, opts);

  // Private subnets take the first four /19s of a /16 (pod IPs come from them: the VPC CNI),
  // public ones small /24s near the end.
  const subnets: AzSubnets[] = args.azs.map((az, i) => ({
    az,
    publicSubnet: new aws.ec2.Subnet(
      `${name}-public-${az}`,
      {
        vpcId: vpc.id,
        availabilityZone: az,
        cidrBlock: subnetCidr(cidr, 8, 240 + i),
        mapPublicIpOnLaunch: false,
        tags: tagged({ Name: `${name}-public-${az}`, "kubernetes.io/role/elb": "1", ...clusterTag }),
      },
      opts,
    ),
    privateSubnet: new aws.ec2.Subnet(
      `${name}-private-${az}`,
      {
        vpcId: vpc.id,
        availabilityZone: az,
        cidrBlock: subnetCidr(cidr, 3, i),
        tags: tagged({ Name: `${name}-private-${az}`, "kubernetes.io/role/internal-elb": "1", ...clusterTag }),
      },
      opts,
    ),
  }));

  const natAzs = args.natPerAz === false ? subnets.slice(0, 1) : subnets;
  const nats = natAzs.map((s) => {
    const eip = new aws.ec2.Eip(`${name}-nat-${s.az}`, { domain: "vpc", tags: tagged({ Name: `${name}-nat-${s.az}` }) }, opts);
    return new aws.ec2.NatGateway(`${name}-nat-${s.az}`, { allocationId: eip.id, subnetId: s.publicSubnet.id, tags: tagged({ Name: `${name}-nat-${s.az}` }) }, opts);
  });

  const privateRts = subnets.map((s, i) => {
    new aws.ec2.RouteTableAssociation(`${name}-public-${s.az}`, { subnetId: s.publicSubnet.id, routeTableId: publicRt.id }, opts);
    const rt = new aws.ec2.RouteTable(
      `${name}-private-rt-${s.az}`,
      { vpcId: vpc.id, routes: [{ cidrBlock: "0.0.0.0/0", natGatewayId: nats[Math.min(i, nats.length - 1)].id }], tags: tagged() },
      opts,
    );
    new aws.ec2.RouteTableAssociation(`${name}-private-${s.az}`, { subnetId: s.privateSubnet.id, routeTableId: rt.id }, opts);
    return rt;
  });

  // Model weights and images are large: S3 and ECR traffic should not pay NAT processing.
  new aws.ec2.VpcEndpoint(
    `${name}-s3`,
    { vpcId: vpc.id, serviceName: `com.amazonaws.${args.region}.s3`, vpcEndpointType: "Gateway", routeTableIds: privateRts.map((rt) => rt.id), tags: tagged() },
    opts,
  );
  const endpointSg = new aws.ec2.SecurityGroup(
    `${name}-endpoints`,
    { vpcId: vpc.id, description: "HTTPS from the VPC to interface endpoints", ingress: [{ protocol: "tcp", fromPort: 443, toPort: 443, cidrBlocks: [cidr] }], tags: tagged() },
    opts,
  );
  for (const svc of ["ecr.api", "ecr.dkr", "sts"]) {
    new aws.ec2.VpcEndpoint(
      `${name}-${svc.replace(".", "-")}`,
      {
        vpcId: vpc.id,
        serviceName: `com.amazonaws.${args.region}.${svc}`,
        vpcEndpointType: "Interface",
        privateDnsEnabled: true,
        subnetIds: subnets.map((s) => s.privateSubnet.id),
        securityGroupIds: [endpointSg.id],
        tags: tagged(),
      },
      opts,
    );
  }
  return { vpc, subnets };
}
