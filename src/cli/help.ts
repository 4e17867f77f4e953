// `sluice --help`: the usage text, also printed after a usage error.

export const USAGE = `Usage: sluice <command> [options]

A streaming request relay for inference services.

Commands:
  serve --config FILE    run the gateway
  check --config FILE    validate a config: exit 0, or 1 with every problem listed
  token [--json] [--name NAME]
                         print a new bearer token and the SHA-256 digest for the config
  demo                   run the bundled demo service and print a ready-to-paste curl line

Options:
  -c, --config FILE      config file, JSON or YAML (default: $SLUICE_CONFIG)
      --json             token: print {"token":…,"sha256":…}
      --name NAME        token: the name to show in the config snippet
  -h, --help             show this help
  -V, --version          print the version, the uWebSockets.js build in use, Node and the C library

Environment:
  SLUICE_CONFIG          config file when --config is not given
  SLUICE_HOST, SLUICE_PORT, LOG_LEVEL
                         override listen.host, listen.port and log.level
  SLUICE_UWS_BUILD       use this uWebSockets.js build (uws-pack, @btc-vision/uwebsockets.js)
                         instead of the newest that loads

Signals (serve): SIGTERM/SIGINT drain then exit 0 (a second one exits at once with 1);
SIGHUP reloads the config's tokens, models and routers (a renewed TLS certificate needs a restart).

Exit codes: 0 ok, 1 invalid config or failed start, 2 usage error.
`;
