#!/usr/bin/env python3
"""The local stand-in for Lambda's SQS event source mapping.

Long-polls the summarizer's FIFO queue (on moto's SQS server locally) and
invokes the summarizer through `cargo lambda watch`'s invoke endpoint with a
real SQS batch event, as the event source mapping would: messages the function
did not report in `batchItemFailures` are deleted, reported ones are left to
come back after the visibility timeout, and a failed invocation (error
payload, HTTP error, function not reachable) leaves the whole batch.

    scripts/local-event-source.py --create-queue   # create the queue, print its URL, exit
    scripts/local-event-source.py                  # poll and invoke until stopped
    scripts/local-event-source.py --once           # one poll (tests, debugging)

Needs boto3 (installed with moto[server]). Settings: AWS_ENDPOINT_URL_SQS,
AWS_REGION, SUMMARY_QUEUE_NAME (default agentic-chat-turns.fifo),
SUMMARIZER_INVOKE_URL (default the summarizer on cargo lambda watch, port 9000).
"""

import argparse
import hashlib
import json
import os
import sys
import time
import urllib.error
import urllib.request

import boto3


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] event-source: {msg}", file=sys.stderr, flush=True)


def sqs_client(endpoint, region):
    return boto3.client("sqs", endpoint_url=endpoint, region_name=region)


def ensure_queue(sqs, name, visibility):
    # An existing queue is used as it is (creating it again with other
    # attributes is an error in SQS).
    try:
        return sqs.get_queue_url(QueueName=name)["QueueUrl"]
    except sqs.exceptions.QueueDoesNotExist:
        pass
    # FIFO, explicit deduplication ids from the publisher (turn ids).
    return sqs.create_queue(
        QueueName=name,
        Attributes={"FifoQueue": "true", "VisibilityTimeout": str(visibility)},
    )["QueueUrl"]


def to_record(msg, arn, region):
    attrs = msg.get("Attributes", {})
    body = msg.get("Body", "")
    return {
        "messageId": msg["MessageId"],
        "receiptHandle": msg["ReceiptHandle"],
        "body": body,
        "attributes": {
            k: attrs[k]
            for k in (
                "ApproximateReceiveCount",
                "SentTimestamp",
                "SenderId",
                "ApproximateFirstReceiveTimestamp",
                "SequenceNumber",
                "MessageGroupId",
                "MessageDeduplicationId",
            )
            if k in attrs
        },
        "messageAttributes": {},
        "md5OfBody": msg.get("MD5OfBody") or hashlib.md5(body.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": region,
    }


def invoke(url, event, timeout):
    """The records the function reported failed, or None if the invocation failed."""
    req = urllib.request.Request(
        url, data=json.dumps(event).encode(), headers={"content-type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            payload = resp.read()
            if resp.headers.get("X-Amz-Function-Error"):
                log(f"function error: {payload[:300]!r}")
                return None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
        log(f"invoke failed: {e}")
        return None
    try:
        answer = json.loads(payload or b"{}")
    except ValueError:
        log(f"invoke answered non-JSON: {payload[:300]!r}")
        return None
    if not isinstance(answer, dict) or "errorType" in answer or "errorMessage" in answer:
        log(f"function error: {str(answer)[:300]}")
        return None
    return {f["itemIdentifier"] for f in answer.get("batchItemFailures") or []}


def poll_once(sqs, queue_url, arn, region, invoke_url, batch_size, wait, timeout):
    got = sqs.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=batch_size,
        WaitTimeSeconds=wait,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    )
    msgs = got.get("Messages", [])
    if not msgs:
        return 0, 0
    event = {"Records": [to_record(m, arn, region) for m in msgs]}
    failed = invoke(invoke_url, event, timeout)
    if failed is None:
        log(f"batch of {len(msgs)} left on the queue (invocation failed)")
        return 0, len(msgs)
    done = [m for m in msgs if m["MessageId"] not in failed]
    for i in range(0, len(done), 10):
        chunk = done[i : i + 10]
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(chunk)],
        )
    log(f"batch of {len(msgs)}: {len(done)} done, {len(failed)} failed (left for redelivery)")
    return len(done), len(failed)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoint", default=os.environ.get("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:5000"))
    p.add_argument("--region", default=os.environ.get("AWS_REGION", "us-east-1"))
    p.add_argument("--queue-name", default=os.environ.get("SUMMARY_QUEUE_NAME", "agentic-chat-turns.fifo"))
    p.add_argument(
        "--invoke-url",
        default=os.environ.get(
            "SUMMARIZER_INVOKE_URL", "http://127.0.0.1:9000/2015-03-31/functions/summarizer/invocations"
        ),
    )
    p.add_argument("--batch-size", type=int, default=10)
    p.add_argument("--wait", type=int, default=20, help="long-poll seconds")
    p.add_argument("--visibility", type=int, default=30, help="queue visibility timeout, seconds")
    p.add_argument("--invoke-timeout", type=int, default=900)
    p.add_argument("--create-queue", action="store_true", help="create the queue, print its URL and exit")
    p.add_argument("--once", action="store_true", help="one poll, then exit")
    a = p.parse_args()

    sqs = sqs_client(a.endpoint, a.region)
    queue_url = ensure_queue(sqs, a.queue_name, a.visibility)
    if a.create_queue:
        print(queue_url)
        return 0
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    log(f"polling {queue_url} -> {a.invoke_url}")
    while True:
        try:
            poll_once(sqs, queue_url, arn, a.region, a.invoke_url, a.batch_size, a.wait, a.invoke_timeout)
        except Exception as e:  # keep polling through a restarting moto or function
            log(f"poll failed: {e}")
            if a.once:
                return 1
            time.sleep(2)
        if a.once:
            return 0


if __name__ == "__main__":
    sys.exit(main())
