// The gateway's entry point for the CLI, the demo and the tests. The gateway itself is the control
// plane on the main thread (src/control/gateway.ts) and one data plane per worker thread
// (src/data/); see the README section "Every core: workers".
export { type Gateway, type GatewayOptions, startGateway } from './control/gateway.js';
