#!/usr/bin/env python3
"""
The drill's Kafka cluster with brokers that can fail one at a time: librdkafka's
mock cluster (the same one kcat hosts), hosted here through ctypes so its mock API can be
called — rd_kafka_mock_broker_set_down / _set_up (a broker's connections closed and new ones
refused, as a broker whose AZ lost power) and rd_kafka_mock_partition_set_leader (what MSK's
controller does next). kcat's command line reaches none of them.

Prints `bootstrap.servers=<list>` on stdout once the cluster listens, then reads one command
per line on stdin and answers `ok` or `err <reason>`:
  down <broker id> | up <broker id> | leader <topic> <partition> <broker id>
  | topic <name> <partitions> <replication factor>
Exits when stdin closes (its parent gone): the cluster goes with it.
"""
import ctypes
import ctypes.util
import sys


def fail(msg):
    print(f"kafka-mock-host: {msg}", file=sys.stderr, flush=True)
    sys.exit(2)


def main():
    if len(sys.argv) != 2 or not sys.argv[1].isdigit() or int(sys.argv[1]) < 1:
        fail("usage: kafka-mock-host.py <brokers ≥ 1>")
    name = ctypes.util.find_library("rdkafka") or "librdkafka.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError as e:
        fail(f"librdkafka not loadable ({name}): {e}; install librdkafka1 (kcat depends on it)")
    vp, cp, i32 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32
    sig = {
        "rd_kafka_conf_new": (vp, []),
        "rd_kafka_conf_set": (ctypes.c_int, [vp, cp, cp, cp, ctypes.c_size_t]),
        "rd_kafka_new": (vp, [ctypes.c_int, vp, cp, ctypes.c_size_t]),
        "rd_kafka_handle_mock_cluster": (vp, [vp]),
        "rd_kafka_mock_cluster_bootstraps": (cp, [vp]),
        "rd_kafka_mock_broker_set_down": (ctypes.c_int, [vp, i32]),
        "rd_kafka_mock_broker_set_up": (ctypes.c_int, [vp, i32]),
        "rd_kafka_mock_partition_set_leader": (ctypes.c_int, [vp, cp, i32, i32]),
        "rd_kafka_mock_topic_create": (ctypes.c_int, [vp, cp, ctypes.c_int, ctypes.c_int]),
        "rd_kafka_err2str": (cp, [ctypes.c_int]),
    }
    for fn, (res, args) in sig.items():
        f = getattr(lib, fn, None)
        if f is None:
            fail(f"{name} has no {fn} (librdkafka older than 1.4?)")
        f.restype, f.argtypes = res, args
    err = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    for k, v in (("test.mock.num.brokers", sys.argv[1]), ("log_level", "0")):
        if lib.rd_kafka_conf_set(conf, k.encode(), v.encode(), err, len(err)) != 0:
            fail(f"{k}: {err.value.decode(errors='replace')}")
    rk = lib.rd_kafka_new(0, conf, err, len(err))  # a producer handle: it owns the mock cluster
    if not rk:
        fail(f"rd_kafka_new: {err.value.decode(errors='replace')}")
    mc = lib.rd_kafka_handle_mock_cluster(rk)
    if not mc:
        fail("no mock cluster on the handle")
    print("bootstrap.servers=" + lib.rd_kafka_mock_cluster_bootstraps(mc).decode(), flush=True)
    for line in sys.stdin:
        p = line.split()
        try:
            if p[:1] == ["down"] and len(p) == 2:
                r = lib.rd_kafka_mock_broker_set_down(mc, int(p[1]))
            elif p[:1] == ["up"] and len(p) == 2:
                r = lib.rd_kafka_mock_broker_set_up(mc, int(p[1]))
            elif p[:1] == ["leader"] and len(p) == 4:
                r = lib.rd_kafka_mock_partition_set_leader(mc, p[1].encode(), int(p[2]), int(p[3]))
            elif p[:1] == ["topic"] and len(p) == 4:
                r = lib.rd_kafka_mock_topic_create(mc, p[1].encode(), int(p[2]), int(p[3]))
            else:
                print(f"err unknown command: {line.strip()[:80]}", flush=True)
                continue
        except ValueError:
            print(f"err not a number in: {line.strip()[:80]}", flush=True)
            continue
        print("ok" if r == 0 else f"err {lib.rd_kafka_err2str(r).decode(errors='replace')}", flush=True)


if __name__ == "__main__":
    main()
