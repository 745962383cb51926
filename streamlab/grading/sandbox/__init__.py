"""The sandbox: where a submission's kernel (and its hidden checks) run, and what keeps them apart. Read in this order:

    isolation       per-submission environment, tagged processes and killing them, topic clean-up
    limits          what a submission may use (Limits), and how it is enforced: control groups, a size-limited tmpfs
    kafka_requests  the Kafka door's view of requests: frames, and the topics and partitions a sandbox may create
    tenancy         Kafka principals, ACLs and quotas: each sandbox touches its own topics, groups, transactions
    door            the Kafka door: the sandbox's one way out, a socket file joined to the broker
    box             the box: bubblewrap's arguments, the kernel's environment, Sandbox, the kernel manager
    boot            its start, with the standard library only: join the groups, drop privileges, exec
"""
