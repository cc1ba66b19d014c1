#!/usr/bin/env python3
"""The local stand-in for Lambda's SQS event source mapping.

Long-polls the summarizer's FIFO queue (on moto's SQS server locally) and
invokes the summarizer through `cargo lambda watch`'s invoke endpoint with a
real SQS batch event, as the event source mapping would: messages the function
did not report in `batchItemFailures` are deleted, reported ones are left to
come back after the visibility timeout, and a failed invocation (error
payload, HTTP error, function not reachable) leaves the whole batch.

The queue follows the template's redrive policy (infra/template.yaml,
TurnEventsQueue: `maxReceiveCount`, then the dead-letter queue): the queue is
created with a FIFO dead-letter queue beside it (`<name>-dlq.fifo`), an
existing queue without a policy gets one, and a message still failing on its
`maxReceiveCount`-th receive is moved to the dead-letter queue at once, as
SQS would on the next receive. Before (issue 25) a record the summarizer kept
failing came back every 30 s without end.

    scripts/local-event-source.py --create-queue   # create the queue, print its URL, exit
    scripts/local-event-source.py                  # poll and invoke until stopped
    scripts/local-event-source.py --once           # one poll (tests, debugging)

Needs boto3 (installed with moto[server]). Settings: AWS_ENDPOINT_URL_SQS,
AWS_REGION, SUMMARY_QUEUE_NAME (default agentic-chat-turns.fifo),
SUMMARIZER_INVOKE_URL (default the summarizer on cargo lambda watch, port 9000),
SUMMARY_MAX_RECEIVE_COUNT (default: the template's `maxReceiveCount`; used
when the script creates or fixes the queue's policy; a queue that has one
keeps its own).
"""

import argparse
import hashlib
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request

import boto3


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] event-source: {msg}", file=sys.stderr, flush=True)


def sqs_client(endpoint, region):
    return boto3.client("sqs", endpoint_url=endpoint, region_name=region)


TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "infra", "template.yaml")
DEFAULT_MAX_RECEIVE_COUNT = 5


def template_max_receive_count(path=TEMPLATE):
    """TurnEventsQueue's `maxReceiveCount` in the SAM template (plain text:
    the template's `!GetAtt` tags need no YAML loader), or None."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    inside = False
    for line in lines:
        if re.match(r"^  \S", line):  # a resource's name, two spaces in
            inside = line.strip() == "TurnEventsQueue:"
            continue
        m = re.match(r"^\s+maxReceiveCount:\s*(\d+)\s*(#.*)?$", line)
        if inside and m:
            return int(m.group(1))
    return None


def dlq_name(name):
    base = name[: -len(".fifo")] if name.endswith(".fifo") else name
    return f"{base}-dlq.fifo"


def queue_arn(sqs, url):
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def ensure_queue(sqs, name, visibility, max_receive_count):
    """The queue's URL; created FIFO with a FIFO dead-letter queue and the
    redrive policy, or, when it exists, used as it is (creating it again
    with other attributes is an error in SQS) except that a queue without a
    redrive policy gets one."""
    try:
        url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    except sqs.exceptions.QueueDoesNotExist:
        url = None
    if url is not None:
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"]).get("Attributes", {})
        if attrs.get("RedrivePolicy"):
            return url
    dlq = sqs.create_queue(
        QueueName=dlq_name(name),
        # As the template's TurnEventsDlq: kept 14 days, to look at.
        Attributes={"FifoQueue": "true", "MessageRetentionPeriod": "1209600"},
    )["QueueUrl"]
    policy = json.dumps({"deadLetterTargetArn": queue_arn(sqs, dlq), "maxReceiveCount": str(max_receive_count)})
    if url is not None:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": policy})
        log(f"{name} had no redrive policy: now {policy}")
        return url
    # FIFO, explicit deduplication ids from the publisher (turn ids).
    return sqs.create_queue(
        QueueName=name,
        Attributes={"FifoQueue": "true", "VisibilityTimeout": str(visibility), "RedrivePolicy": policy},
    )["QueueUrl"]


def redrive(sqs, queue_url):
    """(maxReceiveCount, dead-letter queue URL) from the queue's own policy."""
    attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["RedrivePolicy"]).get("Attributes", {})
    policy = json.loads(attrs["RedrivePolicy"])
    dlq_arn = policy["deadLetterTargetArn"]
    dlq_url = sqs.get_queue_url(QueueName=dlq_arn.rsplit(":", 1)[-1])["QueueUrl"]
    return int(policy["maxReceiveCount"]), dlq_url


def to_dead_letter_queue(sqs, queue_url, dlq_url, msg):
    """Moves one message, as SQS's redrive does: the same body and FIFO group,
    in the dead-letter queue, then gone from the queue. (Sent before it is
    deleted: a crash in between leaves a copy in both, which is harmless: the
    summarizer works from watermarks.)"""
    attrs = msg.get("Attributes", {})
    send = {"QueueUrl": dlq_url, "MessageBody": msg.get("Body", "")}
    if dlq_url.endswith(".fifo"):
        send["MessageGroupId"] = attrs.get("MessageGroupId", "default")
        send["MessageDeduplicationId"] = attrs.get("MessageDeduplicationId") or msg["MessageId"]
    sqs.send_message(**send)
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"])


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


def poll_once(sqs, queue_url, arn, region, invoke_url, batch_size, wait, timeout, dead_letter=None):
    """One receive and invocation; (done, failed) counts. `dead_letter`:
    (maxReceiveCount, dead-letter queue URL): a message that failed on its
    maxReceiveCount-th receive is moved there."""
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
        park(sqs, queue_url, msgs, dead_letter)
        return 0, len(msgs)
    done = [m for m in msgs if m["MessageId"] not in failed]
    for i in range(0, len(done), 10):
        chunk = done[i : i + 10]
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(chunk)],
        )
    log(f"batch of {len(msgs)}: {len(done)} done, {len(failed)} failed (left for redelivery)")
    park(sqs, queue_url, [m for m in msgs if m["MessageId"] in failed], dead_letter)
    return len(done), len(failed)


def park(sqs, queue_url, failed, dead_letter):
    """The failed messages that used their last receive go to the dead-letter
    queue, in their order; the others come back after the visibility timeout."""
    if not dead_letter:
        return
    max_receive_count, dlq_url = dead_letter
    for m in failed:
        received = int(m.get("Attributes", {}).get("ApproximateReceiveCount", "1"))
        if received >= max_receive_count:
            to_dead_letter_queue(sqs, queue_url, dlq_url, m)
            group = m.get("Attributes", {}).get("MessageGroupId")
            log(f"message {m['MessageId']} (group {group}) failed {received} receives: moved to the dead-letter queue")


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
    p.add_argument(
        "--max-receive-count",
        type=int,
        # argparse applies `type` to a string default too: a malformed value is its usage error.
        default=os.environ.get("SUMMARY_MAX_RECEIVE_COUNT") or None,
        help="receives before a failing message goes to the dead-letter queue, for a queue this script creates "
        "or gives a policy (default: infra/template.yaml's maxReceiveCount)",
    )
    p.add_argument("--create-queue", action="store_true", help="create the queue, print its URL and exit")
    p.add_argument("--once", action="store_true", help="one poll, then exit")
    a = p.parse_args()

    max_receive_count = a.max_receive_count if a.max_receive_count is not None else template_max_receive_count()
    if max_receive_count is None:
        log(f"no maxReceiveCount in {TEMPLATE}; using {DEFAULT_MAX_RECEIVE_COUNT}")
        max_receive_count = DEFAULT_MAX_RECEIVE_COUNT
    if max_receive_count < 1:
        p.error("--max-receive-count must be at least 1")
    sqs = sqs_client(a.endpoint, a.region)
    queue_url = ensure_queue(sqs, a.queue_name, a.visibility, max_receive_count)
    if a.create_queue:
        print(queue_url)
        return 0
    arn = queue_arn(sqs, queue_url)
    # The queue's own policy decides (it may predate a template change).
    dead_letter = redrive(sqs, queue_url)
    log(f"polling {queue_url} -> {a.invoke_url}; after {dead_letter[0]} receives a failing message goes to {dead_letter[1]}")
    while True:
        try:
            poll_once(
                sqs, queue_url, arn, a.region, a.invoke_url, a.batch_size, a.wait, a.invoke_timeout, dead_letter
            )
        except Exception as e:  # keep polling through a restarting moto or function
            log(f"poll failed: {e}")
            if a.once:
                return 1
            time.sleep(2)
        if a.once:
            return 0


if __name__ == "__main__":
    sys.exit(main())
