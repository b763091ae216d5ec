"""The AWS provider: DynamoDB store, SQS queue, Lambda handlers, EventBridge Scheduler ticks.

Importing this package does not import boto3; building a store or queue does.
"""

from __future__ import annotations

from .provider import AwsProvider
from .queue import SqsQueue
from .settings import AwsSettings
from .store import DynamoStore

__all__ = ["AwsProvider", "AwsSettings", "DynamoStore", "SqsQueue"]
