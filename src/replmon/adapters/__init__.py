"""Adapters: boto3 S3 and DynamoDB (AWS or any compatible endpoint), Powertools Metrics."""
