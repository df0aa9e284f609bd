"""``flagopt dashboard``: optuna-dashboard on the study storage (127.0.0.1 unless told otherwise)."""

from __future__ import annotations

import argparse
import sys

from flagopt.cli._common import add_storage, examples


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dashboard", help="serve optuna-dashboard on the study storage",
                       **examples("python -m flagopt dashboard --port 8080"))
    add_storage(p)
    p.add_argument("--port", type=int, default=8080, help="default: 8080 (0: any free port)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: only this machine; there is no authentication)")
    p.add_argument("--allow-edits", action="store_true",
                   help="let the dashboard change and delete studies (default: read-only, HTTP 405)")
    p.add_argument("--no-backfill", action="store_true",
                   help="do not write flagopt's note and figures on studies that lack them or have stale ones "
                        "(studies run without optuna-dashboard installed)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from flagopt.dashboard import backfill_live_views, make_server
    server = make_server(args.storage, args.host, args.port, allow_edits=args.allow_edits)
    if not args.no_backfill:
        from flagopt.study import open_storage
        written, why_not = backfill_live_views(open_storage(args.storage, create=False))
        if written:
            print(f"flagopt dashboard: wrote flagopt's note and figures for {', '.join(written)} (missing or out of "
                  "date: run where optuna-dashboard was not installed)", file=sys.stderr, flush=True)
        for name, why in why_not.items():
            print(f"flagopt dashboard: no flagopt note for {name}: {why}", file=sys.stderr, flush=True)
    host, port = server.server_address[:2]
    if not _loopback(args.host):
        print(f"flagopt: warning: --host {args.host} serves every study of this storage to the network without "
              "authentication" + (", and --allow-edits lets anyone there delete them" if args.allow_edits else
                                  " (read-only)"), file=sys.stderr, flush=True)
    print(f"flagopt dashboard: http://{host}:{port}/dashboard (Ctrl-C to stop)", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (127.0.0.0/8, ::1, localhost)."""
    import ipaddress
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name that may resolve to a public address: warn
