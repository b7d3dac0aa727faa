"""The local lab: two MinIO servers with real bucket replication, DynamoDB Local, the real state
machine under moto's ASL interpreter. Needs no AWS account; sends nothing off the loopback."""
