#!/usr/bin/env python3
"""An independent implementation of the JetStream object store (nats-py's, ADR-20) reading and
writing the objects Vigil's SnapshotStore uses, for SnapshotStoreInteropTests.

    objstore_nats_py.py get URL BUCKET NAME        -> JSON: size, chunks, digest, sha256 and length of the data
    objstore_nats_py.py put URL BUCKET NAME FILE   -> JSON: size, chunks, digest, nuid

nats-py checks the digest itself on `get` (DigestMismatchError). Exit 1 with the error on stderr
on any failure. Installed by Tests/setup-deps (`nats-py`).
"""
import asyncio
import hashlib
import json
import sys

import nats


async def main() -> None:
    command, url, bucket, name = sys.argv[1:5]
    nc = await nats.connect(url, connect_timeout=5, max_reconnect_attempts=0)
    try:
        obs = await nc.jetstream().object_store(bucket)
        if command == "get":
            result = await obs.get(name)
            info = result.info
            print(json.dumps({"size": info.size, "chunks": info.chunks, "digest": info.digest,
                              "length": len(result.data), "sha256": hashlib.sha256(result.data).hexdigest()}))
        elif command == "put":
            with open(sys.argv[5], "rb") as f:
                data = f.read()
            info = await obs.put(name, data)
            print(json.dumps({"size": info.size, "chunks": info.chunks, "digest": info.digest, "nuid": info.nuid}))
        else:
            raise SystemExit(f"unknown command {command}")
    finally:
        await nc.close()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as error:  # noqa: BLE001 - the test reads the message
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
