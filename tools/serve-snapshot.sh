#!/usr/bin/env bash
# Serves the snapshot of the real distribution packages on 127.0.0.1:$GPUFLEET_SNAPSHOT_PORT (default 19535) and
# leaves it running, for `molecule test` typed by hand (extensions/molecule/create.yml runs this): a server
# already answering with this snapshot is used as it is. tools/serve-snapshot.sh stop ends the one it started
# (make clean does too).
source "$(dirname "$0")/lib.sh"
case ${1:-start} in
  start) serve_snapshot --detached ;;
  stop) stop_snapshot --detached ;;
  *) die "usage: tools/serve-snapshot.sh [start|stop]" ;;
esac
