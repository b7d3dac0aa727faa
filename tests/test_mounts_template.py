"""templates/mount-baselines.yaml against AWS's documented contracts, offline: what Fargate can and
cannot do, ECS on EC2 with the instance role out of the tasks' reach, one host measuring one thing
at a time, the task sized for the largest preset, the roles (IAM policy evaluator), the results
flow, the runner image's platform, and the functions' build. (`make lint` runs cfn-lint and
`sam validate --lint` on this template.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from replmon.core.record import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE
from replmon.entry import MOUNT_FUNCTIONS
from replmon.local.template import load_template
from replmon.mounts import presets as p
from replmon.mounts.document import RUN_FILE, results_prefix, task_key
from replmon.mounts.memory import preflight
from replmon.mounts.runner import load_targets
from replmon.mounts.targets import Target
from tests.cfnutil import ACCOUNT
from tests.conftest import ROOT, TEMPLATE
from tests.iam import IamRequest, evaluate
from tests.mountstack import (
    BUCKETS,
    MOUNT_TEMPLATE,
    PARAMS,
    RESULTS_BUCKET,
    TARGETS,
    container_env,
    mount_cfn,
    mount_resolver,
    role_policies,
    template,
)


def test_the_probe_stack_keeps_no_mount_parameters_or_resources() -> None:
    probe = load_template(TEMPLATE)
    mount_words = ("Fio", "Mountpoint", "Nfs", "Efs", "Fargate", "MountBaselines")
    assert not [k for k in probe["Parameters"] if k.startswith(mount_words)]
    assert not [k for k in probe["Resources"] if k.startswith(("Fio", "IngestFio"))]
    mount = template()
    assert {f"{fn}Function" for fn in MOUNT_FUNCTIONS} <= set(mount["Resources"])
    for res in mount["Resources"].values():  # the functions and the layer build from the same package as the probe stack's
        if res["Type"] == "AWS::Serverless::Function":
            assert res["Properties"]["CodeUri"] == "../functions/" and res["Metadata"] == {"BuildMethod": "makefile"}
            handler = res["Properties"]["Handler"].split(".")[0]
            assert (ROOT / "functions" / f"{handler}.py").exists()
    assert mount["Resources"]["ReplmonLayer"]["Properties"]["ContentUri"] == "../layers/replmon/"
    assert all(p_.get("Description") for p_ in mount["Parameters"].values()), "every parameter described"


def test_one_source_for_the_table_schema_and_telemetry() -> None:
    mount, probe = template(), load_template(TEMPLATE)
    table = mount["Resources"]["FioTable"]["Properties"]
    assert [k["AttributeName"] for k in table["KeySchema"]] == [PARTITION_KEY, SORT_KEY]
    assert table["KeySchema"] == probe["Resources"]["LatencyTable"]["Properties"]["KeySchema"]
    assert table["TimeToLiveSpecification"]["AttributeName"] == TTL_ATTRIBUTE
    assert mount["Mappings"]["Telemetry"] == probe["Mappings"]["Telemetry"]
    g = mount["Globals"]["Function"]
    assert g["Runtime"] == "python3.13" and g["Architectures"] == ["arm64"]


def test_fargate_task_needs_no_fuse_and_cannot_take_nfs_mount_options() -> None:
    """ECS developer guide: a Fargate task may add only the SYS_PTRACE capability and maps no
    devices (so no FUSE, no kernel mounts: Mountpoint, NFS and Lustre need ECS on EC2); EFS with IAM
    authorization requires transit encryption (ECS API reference, EFSVolumeConfiguration:
    fileSystemId, rootDirectory, transitEncryption, transitEncryptionPort, authorizationConfig -
    no mount options, hence no nconnect: the NFS study's client cannot be reproduced on Fargate)."""
    cfn, r = mount_cfn(), mount_resolver()
    fargate = r.resolve(cfn["Resources"]["FioEfsTaskDefinition"]["Properties"])
    assert fargate["RequiresCompatibilities"] == ["FARGATE"] and fargate["NetworkMode"] == "awsvpc"
    for c in fargate["ContainerDefinitions"]:
        caps = c.get("LinuxParameters", {}).get("Capabilities", {}).get("Add", [])
        assert set(caps) <= {"SYS_PTRACE"} and not c.get("LinuxParameters", {}).get("Devices")
    efs = fargate["Volumes"][0]["EFSVolumeConfiguration"]
    assert set(efs) <= {"FilesystemId", "RootDirectory", "TransitEncryption", "TransitEncryptionPort", "AuthorizationConfig"}
    assert efs["AuthorizationConfig"]["IAM"] == "ENABLED" and efs["TransitEncryption"] == "ENABLED"
    assert "nconnect" in (ROOT / "docs" / "MOUNTS.md").read_text() and "Fargate" in (ROOT / "docs" / "MOUNTS.md").read_text()


def fargate_rules_allow(cpu: str, memory: str) -> bool:
    """The template's Rules, evaluated: does a stack with these parameters deploy?"""
    r = mount_resolver(FargateCpu=cpu, FargateMemory=memory)
    for rule in template()["Rules"].values():
        if r.resolve(rule["RuleCondition"]):
            for a in rule["Assertions"]:
                options, value = a["Assert"]["Fn::Contains"]
                if r.resolve(value) not in options:
                    return False
    return True


def test_fargate_cpu_and_memory_pairs_are_checked_before_deploying() -> None:
    """ECS developer guide, "Troubleshoot Amazon ECS task definition invalid CPU or memory errors":
    4 vCPU takes 8-30 GB in 1 GB steps, 8 vCPU 16-60 GB in 4 GB steps, 16 vCPU 32-120 GB in 8 GB
    steps (these two on Linux platform 1.4.0, which the EFS schedule names)."""
    defaults = template()["Parameters"]
    assert fargate_rules_allow(defaults["FargateCpu"]["Default"], defaults["FargateMemory"]["Default"])
    assert fargate_rules_allow("16384", "122880") and fargate_rules_allow("8192", "20480")
    assert not fargate_rules_allow("4096", "32768") and not fargate_rules_allow("8192", "18432") and not fargate_rules_allow("1024", "512")
    assert set(template()["Rules"]) == {f"FargateMemoryFor{c}" for c in defaults["FargateCpu"]["AllowedValues"]}
    sched = template()["Resources"]["FioEfsSchedule"]["Properties"]["Target"]["EcsParameters"]
    assert sched["LaunchType"] == "FARGATE" and sched["PlatformVersion"] == "1.4.0"
def test_ec2_hosts_keep_the_instance_role_from_tasks_and_measure_one_thing_at_a_time() -> None:
    """ECS developer guide, "Amazon EC2 container instance security considerations": for tasks in
    awsvpc network mode, ECS_AWSVPC_BLOCK_IMDS=true in the agent's configuration keeps containers
    from the instance profile's credentials (the task role still works). The task is awsvpc, the
    agent gets the setting, IMDSv2 answers one hop only. One instance (MaxSize 1) runs the one EC2
    task, which runs its targets one after another under a host lock."""
    cfn, r = mount_cfn(), mount_resolver()
    ec2 = r.resolve(cfn["Resources"]["FioEc2TaskDefinition"]["Properties"])
    assert ec2["RequiresCompatibilities"] == ["EC2"] and ec2["NetworkMode"] == "awsvpc"
    lp = ec2["ContainerDefinitions"][0]["LinuxParameters"]
    assert "SYS_ADMIN" in lp["Capabilities"]["Add"] and lp["Devices"][0]["HostPath"] == "/dev/fuse"
    lt = cfn["Resources"]["FioLaunchTemplate"]["Properties"]["LaunchTemplateData"]
    user_data = lt["UserData"]["Fn::Base64"]["Fn::Sub"]
    config = user_data[user_data.index("/etc/ecs/ecs.config"): user_data.index("CFG\n", user_data.index("CFG") + 3)]
    assert "ECS_AWSVPC_BLOCK_IMDS=true" in config and "ECS_CLUSTER=${FioCluster}" in config
    assert lt["MetadataOptions"] == {"HttpTokens": "required", "HttpEndpoint": "enabled", "HttpPutResponseHopLimit": 1}
    assert cfn["Resources"]["FioAutoScalingGroup"]["Properties"]["MaxSize"] == "1"
    env = container_env(cfn, "FioEc2TaskDefinition", r)
    assert env["REPLMON_FIO_LOCK"].startswith("/var/lib/replmon-fio/")
    assert {m["ContainerPath"] for m in ec2["ContainerDefinitions"][0]["MountPoints"]} >= {"/var/lib/replmon-fio"}
    assert [k for k, v in cfn["Resources"].items() if v["Type"] == "AWS::ECS::TaskDefinition" and "EC2" in json.dumps(v)] == ["FioEc2TaskDefinition"]


def test_the_ebs_row_is_a_gp3_volume_at_its_baseline_as_in_the_study() -> None:
    """R3's EBS row: gp3, 10 GiB, 3000 IOPS, 125 MB/s (the gp3 baseline)."""
    lt = template()["Resources"]["FioLaunchTemplate"]["Properties"]["LaunchTemplateData"]
    ebs = next(b["Ebs"] for b in lt["BlockDeviceMappings"] if b["DeviceName"] == "/dev/xvdb")
    assert (ebs["VolumeType"], ebs["VolumeSize"], ebs["Iops"], ebs["Throughput"]) == ("gp3", 10, 3000, 125)
    assert "/mnt/ebs" in lt["UserData"]["Fn::Base64"]["Fn::Sub"]


@pytest.mark.parametrize("instance", ["c6in.8xlarge", "m6i.8xlarge", "m5n.8xlarge", "m6i.4xlarge"])
def test_the_ec2_task_fits_every_preset_at_full_scale(instance: str) -> None:
    """SEQ8M-Q128T16 holds 16 threads x 128 x 8 MiB = 16 GiB of fio buffers: the task's memory
    (the template's mapping for the instance type) leaves that after Mountpoint's share, so no
    full-scale job is skipped for memory on any allowed instance type."""
    mem = template()["Mappings"]["Ec2Task"][instance]["MemoryMiB"] * 2**20
    for name in p.names():
        for kind in ("mountpoint", "nfs", "lustre"):
            plan = preflight(p.expand(name, kind, "full"), mem)
            assert not [s for s in plan.skipped if s.reason.startswith("memory")], (instance, name, kind)
    assert template()["Parameters"]["InstanceType"]["AllowedValues"] == list(template()["Mappings"]["Ec2Task"])


def test_the_default_host_carries_every_published_cell_and_each_run_records_its_host() -> None:
    """R5's 1M read, 2462 MiB/s, is 20.7 Gbps and R4's cache read, 3170 MB/s, 25.4 Gbps: an
    m6i.8xlarge (12.5 Gbps) or m5n.8xlarge (25 Gbps) caps them, so the stack's default host is a
    c6in.8xlarge (50 Gbps) and carries every published throughput of every preset. Network figures:
    Amazon EC2 Instance Types Guide, network specifications
    (https://docs.aws.amazon.com/ec2/latest/instancetypes/co.md); a task cannot read the instance
    metadata (ECS_AWSVPC_BLOCK_IMDS), so the template hands the runner its host's type."""
    from replmon.mounts import hosts

    param = template()["Parameters"]["InstanceType"]
    assert param["Default"] == hosts.DEFAULT_HOST == "c6in.8xlarge"
    assert param["AllowedValues"] == list(hosts.HOSTS)
    for name in p.names():
        assert hosts.over(name, param["Default"]) == [], name
    # the arithmetic the presets' "differs" and docs/MOUNTS.md state
    assert hosts.gbps(2462 * 2**20) == pytest.approx(20.7, abs=0.05) and hosts.gbps(1517 * 2**20) == pytest.approx(12.7, abs=0.05)
    assert [c for c, _ in hosts.over("nfs-matrix", "m6i.8xlarge")] == ["1M read", "1M randread", "1M write", "1M randwrite",
                                                                        "32K read", "32K randread"]
    assert [c for c, _ in hosts.over("burst-cache-read", "m5n.8xlarge")] == ["burst"]
    differs = p.raw("nfs-matrix")["differs"]
    assert "20.7 Gbps" in differs and "12.7 Gbps" in differs and "c6in.8xlarge" in differs and "1490 MiB/s" in differs
    mounts_md = (ROOT / "docs" / "MOUNTS.md").read_text()
    assert "| `c6in.8xlarge` (default) | 32 | 64 | 50 Gbps | 5,960 | none |" in mounts_md
    for h in hosts.HOSTS.values():  # the task's memory fits in the host's
        assert template()["Mappings"]["Ec2Task"][h.instance_type]["MemoryMiB"] < h.memory_gib * 1024
    assert container_env(mount_cfn(), "FioEc2TaskDefinition", mount_resolver())["REPLMON_FIO_INSTANCE_TYPE"] == "c6in.8xlarge"
    assert container_env(mount_cfn(), "FioEc2TaskDefinition", mount_resolver(InstanceType="m6i.8xlarge"))["REPLMON_FIO_INSTANCE_TYPE"] == "m6i.8xlarge"
    # The Fargate EFS task does not run on InstanceType: its runs must not record the EC2 host's type.
    assert "REPLMON_FIO_INSTANCE_TYPE" not in container_env(mount_cfn(), "FioEfsTaskDefinition", mount_resolver())


def test_each_task_definition_gives_the_runner_targets_it_accepts() -> None:
    """A scheduled task runs with its task definition's environment (no overrides): the target list
    parses as the runner parses it, every bucket a Mountpoint target names is one the task role
    covers, and the NFS / Lustre targets mount with the studies' options."""
    cfn, r = mount_cfn(), mount_resolver()
    for td in ("FioEfsTaskDefinition", "FioEc2TaskDefinition"):
        env = container_env(cfn, td, r)
        targets = load_targets(env)
        assert env["REPLMON_FIO_RESULTS"] == f"s3://{RESULTS_BUCKET}/fio-results/"
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == template()["Mappings"]["Telemetry"]["Metrics"]["Namespace"]
        logs = r.resolve(cfn["Resources"][td]["Properties"])["ContainerDefinitions"][0]["LogConfiguration"]
        assert logs["LogDriver"] == "awslogs" and logs["Options"]["awslogs-group"] == r.ref("FioLogGroup")
        if td == "FioEc2TaskDefinition":
            assert [t.name for t in targets] == [t["name"] for t in TARGETS]
            argv = {t.name: t.mount_argv() for t in targets}
            assert argv["nfs"] == ["mount", "-t", "nfs", "-o", "nconnect=16", "10.0.0.5:/export", "/mnt/replmon/nfs"]
            assert argv["lustre"][:5] == ["mount", "-t", "lustre", "-o", "noatime,flock"]
            assert argv["mp-cross-region"][argv["mp-cross-region"].index("--region") + 1] == "ap-northeast-1"
            # every Mountpoint target mounts the prefix its role covers (replmon-fio/): its listings and lookups stay inside
            assert all(a[a.index("--prefix") + 1] == "replmon-fio/" for t, a in argv.items() if t.startswith("mp-"))
    bad = {**container_env(cfn, "FioEc2TaskDefinition", r), "REPLMON_FIO_BUCKETS": "bench-std"}
    with pytest.raises(ValueError, match="MountpointBuckets"):
        load_targets(bad)


def test_both_task_definitions_give_the_sdk_its_region() -> None:
    """The runner's CloudWatch client (the file system's series) takes its Region from the
    environment: Fargate sets AWS_REGION, the ECS agent on EC2 did not (aws/containers-roadmap#1611,
    "ECS agent should set AWS_REGION and AWS_DEFAULT_REGION like Fargate"; injected only since
    aws/amazon-ecs-agent#4946, 2026) and the task cannot ask IMDS (ECS_AWSVPC_BLOCK_IMDS). Both
    task definitions set it to the stack's Region, where the file systems publish."""
    cfn, r = mount_cfn(), mount_resolver()
    for td in ("FioEfsTaskDefinition", "FioEc2TaskDefinition"):
        assert container_env(cfn, td, r)["AWS_REGION"] == r.resolve({"Ref": "AWS::Region"}), td


def test_the_security_group_parameter_names_fsx_for_lustres_ports() -> None:
    """FSx for Lustre guide, "Creating an FSx for Lustre file system fails"
    (docs.aws.amazon.com/fsx/latest/LustreGuide/cannot-create-fs.html): "allow inbound traffic on
    ports 988 and 1018-1023"; the parameter and MOUNTS.md say the same."""
    description = template()["Parameters"]["SecurityGroupIds"]["Description"]
    mounts = (ROOT / "docs" / "MOUNTS.md").read_text()
    for text in (description, mounts):
        assert "988 and 1018-1023" in text and "Lustre 988 " not in text and "Lustre 988)" not in text


def test_schedules_run_only_this_stacks_tasks_with_least_privilege() -> None:
    """EventBridge Scheduler's ECS target needs ecs:RunTask on the task definition and iam:PassRole
    for the task's roles (Scheduler user guide, "Set up the execution role"); nothing more."""
    cfn, r = mount_cfn(), mount_resolver()
    role = r.resolve(cfn["Resources"]["FioSchedulerRole"]["Properties"])
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "scheduler.amazonaws.com"}
    policies = {"Scheduler": role_policies(cfn, "FioSchedulerRole", r)}
    cluster = r.get_att("FioCluster", "Arn")
    taskdefs = [r.ref("FioEfsTaskDefinition"), r.ref("FioEc2TaskDefinition")]
    roles = [r.get_att("FioExecutionRole", "Arn"), r.get_att("FioTaskRole", "Arn")]
    ok = [("Scheduler", IamRequest("ecs:RunTask", t, (("ecs:cluster", cluster),))) for t in taskdefs]
    ok += [("Scheduler", IamRequest("iam:PassRole", x, (("iam:PassedToService", "ecs-tasks.amazonaws.com"),))) for x in roles]
    assert evaluate(ok, policies, ACCOUNT) == []
    bad = [("Scheduler", IamRequest("ecs:RunTask", taskdefs[0], (("ecs:cluster", cluster.replace("FioCluster", "other")),))),
           ("Scheduler", IamRequest("ecs:RunTask", f"arn:aws:ecs:us-east-1:{ACCOUNT}:task-definition/other:1", (("ecs:cluster", cluster),))),
           ("Scheduler", IamRequest("iam:PassRole", roles[0], (("iam:PassedToService", "lambda.amazonaws.com"),)))]
    assert len(evaluate(bad, policies, ACCOUNT)) == 3


def test_execution_role_pulls_this_accounts_images_and_logs_only_to_its_group() -> None:
    """ECS task execution role (ECS developer guide): the agent pulls the image from ECR and writes
    the awslogs stream with it; ecr:GetAuthorizationToken has no resource type (Service
    Authorization Reference for Amazon ECR), pulls are per repository."""
    cfn, r = mount_cfn(), mount_resolver()
    assert "ManagedPolicyArns" not in cfn["Resources"]["FioExecutionRole"]["Properties"]
    policies = {"Exec": role_policies(cfn, "FioExecutionRole", r)}
    group = r.get_att("FioLogGroup", "Arn").removesuffix(":*")
    repo = f"arn:aws:ecr:us-east-1:{ACCOUNT}:repository/replmon-fio"
    ok = [("Exec", IamRequest("ecr:GetAuthorizationToken", "*")), ("Exec", IamRequest("ecr:BatchGetImage", repo)),
          ("Exec", IamRequest("ecr:GetDownloadUrlForLayer", repo)), ("Exec", IamRequest("logs:PutLogEvents", f"{group}:log-stream:ec2/x")),
          ("Exec", IamRequest("logs:CreateLogStream", f"{group}:log-stream:ec2/x"))]
    assert evaluate(ok, policies, ACCOUNT) == []
    bad = [("Exec", IamRequest("ecr:BatchGetImage", repo.replace(ACCOUNT, "999999999999"))),
           ("Exec", IamRequest("logs:PutLogEvents", f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:other:log-stream:x")),
           ("Exec", IamRequest("s3:GetObject", "arn:aws:s3:::any/x"))]
    assert len(evaluate(bad, policies, ACCOUNT)) == 3


def test_task_role_reaches_each_mountpoint_bucket_prefix_and_nothing_else() -> None:
    """Mountpoint's documented needs on a general purpose bucket (doc/CONFIGURATION.md, "IAM
    permissions"): ListBucket (scoped with s3:prefix), GetObject to read, PutObject and
    AbortMultipartUpload to write, DeleteObject for --allow-delete; a directory bucket's object calls
    ride on a CreateSession for that bucket (S3 User Guide, "Authenticating and authorizing requests"
    for S3 Express One Zone). Every bucket of MountpointBuckets, one statement entry each."""
    cfn, r = mount_cfn(), mount_resolver()
    policies = {"Task": role_policies(cfn, "FioTaskRole", r)}
    ok = [("Task", IamRequest("s3:PutObject", f"arn:aws:s3:::{RESULTS_BUCKET}/{results_prefix('fio-results/', 'nfs', 'nfs-matrix', 'r')}{RUN_FILE}")),
          ("Task", IamRequest("s3:PutObject", f"arn:aws:s3:::{RESULTS_BUCKET}/{task_key('fio-results/', 'abc')}")),
          ("Task", IamRequest("cloudwatch:GetMetricData", "*"))]
    for b in BUCKETS:
        obj = f"arn:aws:s3:::{b}/replmon-fio/replmon-fio/layout/x/f"
        ok += [("Task", IamRequest(a, obj)) for a in ("s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject")]
        ok += [("Task", IamRequest("s3:ListBucket", f"arn:aws:s3:::{b}", (("s3:prefix", "replmon-fio/"),))),
               ("Task", IamRequest("s3express:CreateSession", f"arn:aws:s3express:us-east-1:{ACCOUNT}:bucket/{b}"))]
    assert evaluate(ok, policies, ACCOUNT) == []
    bad = [("Task", IamRequest("s3:GetObject", f"arn:aws:s3:::{RESULTS_BUCKET}/fio-results/x")),
           ("Task", IamRequest("s3:PutObject", "arn:aws:s3:::bench-std/data/f")),
           ("Task", IamRequest("s3:GetObject", "arn:aws:s3:::other-bucket/replmon-fio/f")),
           ("Task", IamRequest("s3:ListBucket", "arn:aws:s3:::bench-std", (("s3:prefix", ""),))),
           ("Task", IamRequest("s3express:CreateSession", f"arn:aws:s3express:us-east-1:{ACCOUNT}:bucket/other--use1-az4--x-s3"))]
    assert len(evaluate(bad, policies, ACCOUNT)) == 5
    # Without Mountpoint buckets there is no Mountpoint statement at all.
    none = mount_resolver(cfn, MountpointBuckets=[""])
    assert [x["name"] for x in role_policies(cfn, "FioTaskRole", none)] == ["results", "efs-target"]


def test_results_flow_matches_the_runner_layout() -> None:
    """The bucket notifies on the key the runner writes last, under the prefix the tasks' REPLMON_FIO_RESULTS names."""
    cfn, r = mount_cfn(), mount_resolver()
    bucket = r.resolve(cfn["Resources"]["FioResultsBucket"]["Properties"])
    rules = {x["Name"]: x["Value"] for x in bucket["NotificationConfiguration"]["QueueConfigurations"][0]["Filter"]["S3Key"]["Rules"]}
    prefix = container_env(cfn, "FioEc2TaskDefinition", r)["REPLMON_FIO_RESULTS"].split("/", 3)[3]
    key = prefix + results_prefix("", "nfs", "nfs-matrix", "20261122T140000Z-ab12cd") + RUN_FILE
    assert key.startswith(rules["prefix"]) and key.endswith(rules["suffix"])
    assert not task_key(prefix, "abc").endswith(rules["suffix"])  # a task summary is not a result set


def test_the_runner_image_pins_what_it_can_and_writes_down_what_it_installed() -> None:
    """AL2023 repositories are versioned: `dnf --releasever=<release>` installs what that release
    shipped (AL2023 User Guide, "Using Deterministic upgrades through versioned repositories",
    https://docs.aws.amazon.com/linux/al2023/ug/deterministic-upgrades-usage.html); Mountpoint comes
    from its own release of one version, signature checked. The runner records the image's list
    with every result (runner.versions reads /opt/replmon/versions.txt)."""
    text = (ROOT / "runners" / "fio" / "Dockerfile").read_text()
    release = re.search(r"^ARG AL2023_RELEASE=(2023\.\d+\.\d{8})$", text, re.M)
    mountpoint = re.search(r"^ARG MOUNTPOINT_VERSION=(\d+\.\d+\.\d+)$", text, re.M)
    assert release and mountpoint, "pin the AL2023 release and the Mountpoint version"
    installs = re.findall(r"dnf install -y ([^\n]*)", text)
    assert installs and all('--releasever="${AL2023_RELEASE}"' in line for line in installs)
    assert "mountpoint-s3-release/${MOUNTPOINT_VERSION}/x86_64/mount-s3-${MOUNTPOINT_VERSION}-x86_64.rpm" in text
    assert "gpg --status-fd 1 --verify" in text and "> /opt/replmon/versions.txt" in text
    [packages] = [line for line in text.splitlines() if line.strip().startswith("fio ")]
    assert "mount-s3" not in packages.split()  # not AL2023's mount-s3 package: the pinned release's
    # AL2023's image ships gnupg2-minimal (its gpg checks the signature); gnupg2 conflicts with it.
    assert "gnupg2" not in packages.split()
    # The base image is the release the packages come from, not the moving :2023 tag.
    assert re.search(r"^FROM public\.ecr\.aws/amazonlinux/amazonlinux:\$\{AL2023_RELEASE\}$", text, re.M)
    # 1.23.0 is the newest tagged Mountpoint release (awslabs/mountpoint-s3 tags mountpoint-s3-1.23.0).
    assert mountpoint[1] == "1.23.0"
    # The signing key's fingerprint is pinned: the two the S3 User Guide lists ("Installing
    # Mountpoint", https://docs.aws.amazon.com/AmazonS3/latest/userguide/mountpoint-installation.html).
    keys = re.search(r'^ARG MOUNTPOINT_KEYS="([0-9A-F|]+)"$', text, re.M)
    assert keys and set(keys[1].split("|")) == {"8AEFE705EBE329C0948C75A66F1C3B3AEF4B030B", "673FE4061506BB469A0EF857BE397A52B086DA5A"}
    assert "VALIDSIG .* (${MOUNTPOINT_KEYS})$" in text and "pipefail" in text


def test_the_runner_image_names_its_platform_and_passes_hadolint() -> None:
    """The task definitions say X86_64 (RuntimePlatform); `make runner-image` builds for linux/amd64
    (docker build --platform), whatever machine builds it."""
    hadolint = Path(sys.executable).parent / "hadolint"
    r = subprocess.run([str(hadolint), str(ROOT / "runners" / "fio" / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (ROOT / "runners" / "fio" / "Dockerfile").read_text()
    assert "amazonlinux:${AL2023_RELEASE}" in text and "mount-s3" in text and "replmon.mounts.runner" in text
    make = (ROOT / "Makefile").read_text()
    assert "RUNNER_PLATFORM := linux/amd64" in make and re.search(r"docker build --platform \$\(RUNNER_PLATFORM\)", make)
    arch = {"X86_64": "linux/amd64", "ARM64": "linux/arm64"}
    for td in ("FioEfsTaskDefinition", "FioEc2TaskDefinition"):
        assert arch[template()["Resources"][td]["Properties"]["RuntimePlatform"]["CpuArchitecture"]] == "linux/amd64"
    assert "/arm64/" not in template()["Parameters"]["EcsAmi"]["Default"]  # the x86_64 ECS-optimized AMI


def test_the_documented_targets_are_the_ones_tested() -> None:
    """docs/MOUNTS.md's Ec2Targets example is this module's deployment (and parses)."""
    text = (ROOT / "docs" / "MOUNTS.md").read_text()
    block = re.search(r"<!-- targets:start -->\n```json\n(.*?)```\n<!-- targets:end -->", text, re.S)
    assert block, "docs/MOUNTS.md lost its targets example"
    assert json.loads(block.group(1)) == TARGETS
    assert [Target.from_json(t).name for t in TARGETS] == [t["name"] for t in TARGETS]
    assert json.loads(PARAMS["Ec2Targets"]) == TARGETS


@pytest.mark.build
def test_sam_build_of_the_mount_stack(tmp_path: Path) -> None:
    """`sam build -t templates/mount-baselines.yaml`: the same makefile layer and thin handlers."""
    import os

    build = tmp_path / "build"
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0", "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}", "REPLMON_SRC": str(ROOT / "src")}
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "sam"), "build", "--build-dir", str(build), "--template-file", str(MOUNT_TEMPLATE)],
                       capture_output=True, text=True, timeout=900, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    layer = build / "ReplmonLayer" / "python" / "replmon"
    assert (layer / "mounts" / "ingest.py").exists() and (layer / "mounts" / "presets.json").exists() and not (layer / "lab").exists()
    for fn in MOUNT_FUNCTIONS:
        assert not (build / f"{fn}Function" / "replmon").exists()
    built: dict[str, Any] = load_template(build / "template.yaml")
    assert {f"{fn}Function" for fn in MOUNT_FUNCTIONS} <= set(built["Resources"])
