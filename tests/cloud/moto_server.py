"""Run moto's ThreadedMotoServer in its own process (MOTO_AMIS_PATH must be set before moto loads).

Prints the port on the first stdout line, then serves until stdin closes.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    if "MOTO_AMIS_PATH" not in os.environ:
        raise SystemExit("MOTO_AMIS_PATH is not set")
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _host, port = server.get_host_and_port()
    print(port, flush=True)
    try:
        sys.stdin.read()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
