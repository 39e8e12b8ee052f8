"""Record a server's KV events to a JSON-lines file, headless, and say what the stream did.

    python -m teaching.live.record tcp://gpu-box:5557 --replay tcp://gpu-box:5558 --out kv.jsonl --seconds 60

The file opens in the Live page ("a recording") and replays into the same views.
"""

from __future__ import annotations

import argparse
import sys
import time

from teaching.live.frames import frame_to_json
from teaching.live.session import LiveSession
from teaching.live.subscriber import Endpoint, Notice

MAX_SECONDS = 24 * 3600


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m teaching.live.record", description=__doc__.splitlines()[0])
    parser.add_argument("events", help="the KV-event endpoint, e.g. tcp://host:5557")
    parser.add_argument("--replay", default=None, help="the replay endpoint, e.g. tcp://host:5558")
    parser.add_argument("--topic", default="", help="only this topic (default: all)")
    parser.add_argument("--name", default="", help="replica name stored with each frame (for several servers)")
    parser.add_argument("--out", required=True, help="the JSON-lines file to write")
    parser.add_argument("--seconds", type=float, default=60.0, help=f"how long to record (at most {MAX_SECONDS})")
    args = parser.parse_args(argv)
    if not 0 < args.seconds <= MAX_SECONDS:
        parser.error(f"--seconds must be in (0, {MAX_SECONDS}]")
    session = LiveSession([Endpoint(args.name, args.events, args.replay, topic=args.topic)]).start()
    written = 0
    deadline = time.monotonic() + args.seconds
    try:
        with open(args.out, "w", encoding="utf-8") as out:
            while time.monotonic() < deadline:
                session.drain()
                while session.recording:
                    out.write(frame_to_json(session.recording.popleft()) + "\n")
                    written += 1
                while session.notices:
                    notice: Notice = session.notices.popleft()
                    print(notice.text, file=sys.stderr)
                out.flush()
                time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        session.stop()
    replica = session.state.replica(args.name)
    print(f"{written} batches -> {args.out}: {replica.total_stored} blocks stored, {replica.total_removed} removed, "
          f"{len(replica.blocks)} cached at the end", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
