/**
 * The identifier formats the actuator and the infrastructure agree on, in one place
 * (infra/config/dns.ts validates the stack's list with the same pattern the agent checks).
 */

/** An ALB or NLB ARN: what ARC zonal shift takes as `resourceIdentifier`. */
export const LOAD_BALANCER_ARN = /^arn:aws[a-z-]*:elasticloadbalancing:[a-z0-9-]+:\d{12}:loadbalancer\/(net|app)\/[A-Za-z0-9-]+\/[0-9a-f]+$/;
