"""Stand-in nvidia-ctk (gpufleet.node tests): what NVIDIA's nvidia-ctk @VERSION@ does for the commands the
gpufleet.node roles and NVIDIA's package scripts use, and nothing else (NVIDIA/nvidia-container-toolkit,
cmd/nvidia-ctk at v@UPSTREAM@):

  --version / -v        "NVIDIA Container Toolkit CLI version <version>" and "commit: <git commit>" (urfave/cli's
                        version printer over internal/info GetVersionString)
  config --config-file=PATH --in-place
                        the package's postinst: writes the default config where none is (kept where one is)
  cdi generate [--output=PATH] [--format=yaml|json] [--device-name-strategy=index|uuid ...] [--vendor] [--class]
                        a CDI spec of every GPU NVML reports (here: what nvidia-smi reports), devices named by
                        index and UUID plus "all"; on stdout without --output, else written with mode 0644 in the
                        format its extension implies; no GPU library: "failed to initialize NVML:
                        ERROR_LIBRARY_NOT_FOUND" and exit 1. From 1.18 the output path may come from the environment,
                        NVIDIA_CTK_CDI_OUTPUT_FILE_PATH (cmd/nvidia-ctk/cdi/generate/generate.go at v1.18.2,
                        cli.EnvVars of --output), as the package's nvidia-cdi-refresh.service sets it
  cdi list [--spec-dir=DIR ...]
                        "<kind>=<name>" per device of the specs in /etc/cdi and /var/run/cdi, and the count logged

Log lines go to stderr in logrus' text format, as the real tool writes them when stderr is not a terminal.
"""
import datetime
import glob
import json
import os
import re
import subprocess
import sys

VERSION = "@UPSTREAM@"
COMMIT = "@COMMIT@"
DEFAULT_CONFIG = "/etc/nvidia-container-runtime/config.toml"
SPEC_DIRS = ["/etc/cdi", "/var/run/cdi"]
CDI_VERSION = "0.5.0"
QUIET = False


def log(level, message):
    if QUIET and level != "error":
        return
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    sys.stderr.write('time="%s" level=%s msg="%s"\n' % (stamp, level, message.replace('"', '\\"')))


def fail(message):
    log("error", message)
    sys.exit(1)


def options(args, multi=()):
    """--name=value / --name value pairs and bare flags; repeated names in multi collect lists."""
    found, rest = {}, []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg.startswith("--") and len(arg) > 2:
            name, sep, value = arg[2:].partition("=")
            if not sep:
                if index + 1 < len(args) and not args[index + 1].startswith("-") and name not in ("in-place",):
                    value = args[index + 1]
                    index += 1
                else:
                    value = True
            if name in multi:
                found.setdefault(name, []).append(value)
            else:
                found[name] = value
        else:
            rest.append(arg)
        index += 1
    return found, rest


def gpus():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
                             capture_output=True, text=True, check=False)
    except OSError:
        return None
    if out.returncode != 0:
        return None
    return [tuple(part.strip() for part in line.split(",")) for line in out.stdout.splitlines() if line.strip()]


def spec_for(devices, vendor, klass, strategies):
    named = []
    for index, uuid in devices:
        edits = {"deviceNodes": [{"path": "/dev/nvidia%s" % index}]}
        for strategy in strategies:
            named.append({"name": index if strategy == "index" else uuid, "containerEdits": edits})
    named.append({"name": "all", "containerEdits": {
        "deviceNodes": [{"path": "/dev/nvidia%s" % index} for index, _uuid in devices]}})
    return {
        "cdiVersion": CDI_VERSION,
        "kind": "%s/%s" % (vendor, klass),
        "devices": named,
        "containerEdits": {
            "env": ["NVIDIA_VISIBLE_DEVICES=void"],
            "deviceNodes": [{"path": "/dev/nvidia-modeset"}, {"path": "/dev/nvidia-uvm"},
                            {"path": "/dev/nvidia-uvm-tools"}, {"path": "/dev/nvidiactl"}],
            "hooks": [{"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook",
                       "args": ["nvidia-cdi-hook", "update-ldcache", "--folder", "/usr/lib/x86_64-linux-gnu"]}],
        },
    }


def yaml_scalar(value):
    """Plain where YAML reads the text back as the same string (as go-yaml writes it), quoted otherwise ("0")."""
    text = str(value)
    if re.match(r"^[A-Za-z0-9_/][A-Za-z0-9_./=-]*$", text) and text not in ("true", "false", "null", "yes", "no") \
            and not re.match(r"^[-+]?([0-9]+|[0-9]*\.[0-9]+)$", text):
        return text
    return json.dumps(text)


def to_yaml(value, indent=0):
    pad = "  " * indent
    lines = []
    if isinstance(value, dict):
        for key in sorted(value):
            item = value[key]
            if isinstance(item, (dict, list)):
                lines.append("%s%s:" % (pad, key))
                lines.extend(to_yaml(item, indent + (1 if isinstance(item, dict) else 0)))
            else:
                lines.append("%s%s: %s" % (pad, key, yaml_scalar(item)))
    else:
        for item in value:
            if isinstance(item, dict):
                sub = to_yaml(item, indent + 1)
                lines.append("%s- %s" % (pad, sub[0].lstrip()))
                lines.extend(sub[1:])
            else:
                lines.append("%s- %s" % (pad, yaml_scalar(item)))
    return lines


def cdi_generate(args):
    opts, _rest = options(args, multi=("device-name-strategy",))
    output = opts.get("output", "")
    if not output and tuple(int(part) for part in VERSION.split(".")[:2]) >= (1, 18):
        output = os.environ.get("NVIDIA_CTK_CDI_OUTPUT_FILE_PATH", "")
    fmt = opts.get("format")
    if not fmt:
        fmt = "json" if output.lower().endswith(".json") else "yaml"
    if fmt not in ("yaml", "json"):
        fail("invalid output format: %s" % fmt)
    strategies = opts.get("device-name-strategy") or ["index", "uuid"]
    for strategy in strategies:
        if strategy not in ("index", "uuid", "type-index"):
            fail("invalid device name strategy: %s" % strategy)
    devices = gpus()
    if devices is None:
        fail("failed to generate CDI spec: failed to create device CDI specs: failed to initialize NVML: "
             "ERROR_LIBRARY_NOT_FOUND")
    log("info", 'Auto-detected mode as "nvml"')
    spec = spec_for(devices, opts.get("vendor", "nvidia.com"), opts.get("class", "gpu"), strategies)
    log("info", "Generated CDI spec with version %s" % CDI_VERSION)
    text = (json.dumps(spec) + "\n") if fmt == "json" else "---\n" + "\n".join(to_yaml(spec)) + "\n"
    if not output:
        sys.stdout.write(text)
        return
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    with open(output, "w", encoding="utf-8") as stream:
        stream.write(text)
    os.chmod(output, 0o644)


def read_devices(path):
    text = open(path, encoding="utf-8").read()
    if path.endswith(".json"):
        spec = json.loads(text)
        return spec["kind"], [device["name"] for device in spec.get("devices", [])]
    kind = re.search(r"^kind: *(\S+)", text, re.M).group(1)
    names = [json.loads(n) if n.startswith('"') else n for n in re.findall(r"^(?:- |  )name: *(\S+)", text, re.M)]
    return kind, names


def cdi_list(args):
    opts, _rest = options(args, multi=("spec-dir",))
    found = []
    for directory in opts.get("spec-dir") or SPEC_DIRS:
        for path in sorted(glob.glob(os.path.join(directory, "*.yaml")) + glob.glob(os.path.join(directory, "*.json"))):
            kind, names = read_devices(path)
            found += ["%s=%s" % (kind, name) for name in names]
    log("info", "Found %d CDI devices" % len(found))
    for device in sorted(found):
        print(device)


def config(args):
    opts, _rest = options(args)
    path = opts.get("config-file", DEFAULT_CONFIG)
    if opts.get("in-place") and not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as stream:
            stream.write(open("/usr/share/gpufleet-standin/nvidia-container-runtime-config.toml", encoding="utf-8").read())


def main(argv):
    global QUIET
    args = list(argv)
    while args and args[0].startswith("-"):
        flag = args.pop(0)
        if flag in ("--version", "-v"):
            print("NVIDIA Container Toolkit CLI version %s\ncommit: %s" % (VERSION, COMMIT))
            return
        if flag in ("--quiet", "-q"):
            QUIET = True
    command = args[:2]
    if command == ["cdi", "generate"]:
        cdi_generate(args[2:])
    elif command == ["cdi", "list"]:
        cdi_list(args[2:])
    elif args[:1] == ["config"]:
        config(args[1:])
    else:
        sys.stderr.write("nvidia-ctk stand-in (gpufleet.node tests): %s is not part of the stand-in\n" % " ".join(args))
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
