"""Benchmark the Service Bus emulator through the real SDK: send, receive + complete, msg/s.

    python tests/bench/servicebus_bench.py [--messages N] [--size BYTES]

Starts the emulator as a subprocess (as the tests do), then for batch sizes 1 and 100:
sends N messages (one ``send_messages`` call per batch), receives them in peek-lock with
``max_message_count=batch`` and completes each one. Prints one line per batch size and the
emulator's RSS at the end.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from azure.servicebus import ServiceBusClient, ServiceBusMessage

from cronwarden.emulators.servicebus.pytest_plugin import start_emulator


def run(conn: str, queue: str, messages: int, batch: int, size: int) -> dict[str, float]:
    body = b"x" * size
    with ServiceBusClient.from_connection_string(conn) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage(body))  # open the link outside the timing
            started = time.perf_counter()
            for _ in range(messages // batch):
                if batch == 1:
                    sender.send_messages(ServiceBusMessage(body))
                else:
                    sender.send_messages([ServiceBusMessage(body) for _ in range(batch)])
            send_s = time.perf_counter() - started
        with client.get_queue_receiver(queue, prefetch_count=0) as receiver:
            received = 0
            started = time.perf_counter()
            while received < messages + 1:
                got = receiver.receive_messages(max_message_count=batch, max_wait_time=5)
                if not got:
                    break
                for msg in got:
                    receiver.complete_message(msg)
                received += len(got)
            recv_s = time.perf_counter() - started
    return {
        "send_per_s": messages / send_s,
        "receive_complete_per_s": received / recv_s,
        "end_to_end_per_s": messages / (send_s + recv_s),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        emulator = start_emulator(f"{tmp}/emulator.log")
        try:
            for batch in (1, 100):
                queue = emulator.create_queue(lock_duration=60)
                result = run(emulator.connection_string, queue, args.messages, batch, args.size)
                emulator.delete_queue(queue)
                print(
                    f"batch={batch:<4} messages={args.messages} size={args.size}B  "
                    f"send {result['send_per_s']:8.0f} msg/s  "
                    f"receive+complete {result['receive_complete_per_s']:8.0f} msg/s  "
                    f"end-to-end {result['end_to_end_per_s']:8.0f} msg/s"
                )
            print(f"emulator RSS: {emulator.rss_bytes() / 2**20:.1f} MiB")
        finally:
            emulator.process.stop()


if __name__ == "__main__":
    main()
