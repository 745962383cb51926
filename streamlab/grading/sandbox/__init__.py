"""The sandbox: where a submission's kernel (and its hidden checks) run, and what keeps them apart. Read in this order:

    isolation       per-submission environment, tagged processes and killing them, topic clean-up
    kafka_requests  the Kafka door's view of requests: frames, and the topics and partitions a sandbox may create
    tenancy         Kafka principals, ACLs and quotas: each sandbox touches its own topics, groups, transactions
    box             the box: bubblewrap, control groups, limits, the Kafka door, the kernel manager
    boot            its start, with the standard library only: join the groups, drop privileges, exec
"""
