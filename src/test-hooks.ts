// Test builds only: hooks a test may switch on in a gateway process it spawns (a route that
// crashes a worker, Kubernetes timings in milliseconds). Both NODE_ENV=test and
// SLUICE_TEST_HOOKS=1 are needed, so no production environment turns them on by accident.

export function testHooksEnabled(): boolean {
  return process.env['NODE_ENV'] === 'test' && process.env['SLUICE_TEST_HOOKS'] === '1';
}
