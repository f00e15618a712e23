"""Render a role's variables for a platform the way Ansible does: defaults, vars/main.yml and the platform file
that gpufleet.node._common's fallback list picks (the list itself is read from _common, not copied here)."""
import pathlib

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

try:  # ansible-core 2.19 templates only strings marked as trusted (as a role's own files are)
    from ansible.template import trust_as_template
except ImportError:  # older ansible-core trusts every string
    def trust_as_template(value):
        return value

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLES = ROOT / "roles"

FACTS = {
    ("Debian", "12"): {"distribution": "Debian", "distribution_version": "12.7", "distribution_major_version": "12",
                       "distribution_release": "bookworm", "os_family": "Debian"},
    ("Ubuntu", "20.04"): {"distribution": "Ubuntu", "distribution_version": "20.04", "distribution_major_version": "20",
                          "distribution_release": "focal", "os_family": "Debian"},
    ("Ubuntu", "22.04"): {"distribution": "Ubuntu", "distribution_version": "22.04", "distribution_major_version": "22",
                          "distribution_release": "jammy", "os_family": "Debian"},
    ("Ubuntu", "24.04"): {"distribution": "Ubuntu", "distribution_version": "24.04", "distribution_major_version": "24",
                          "distribution_release": "noble", "os_family": "Debian"},
    ("Rocky", "9.4"): {"distribution": "Rocky", "distribution_version": "9.4", "distribution_major_version": "9",
                       "distribution_release": "Blue Onyx", "os_family": "RedHat"},
}


def load(path):
    with open(path, encoding="utf-8") as stream:
        return yaml.safe_load(stream) or {}


def trusted(value):
    """The loaded data marked as Ansible marks a role's own vars files: templates in it are rendered."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [trusted(item) for item in value]
    if isinstance(value, dict):
        return {key: trusted(item) for key, item in value.items()}
    return value


def common_vars():
    return load(ROLES / "_common" / "vars" / "main.yml")


def facts_for(distribution, version, architecture="x86_64", **extra):
    facts = dict(FACTS[(distribution, version)])
    facts.update({"architecture": architecture, "kernel": "6.1.0-28-amd64", "virtualization_role": "host",
                  "virtualization_type": "kvm"})
    facts.update(extra)
    return facts


def templar(variables):
    return Templar(loader=DataLoader(), variables=variables)


def platform_file(role, facts):
    """The file _common's first_found picks in the role's vars/ (the same list of names, templated)."""
    names = common_vars()["__common_platform_files"]["files"]
    for name in templar({"ansible_facts": facts}).template(trusted(names)):
        if (ROLES / role / "vars" / name).is_file():
            return ROLES / role / "vars" / name
    raise AssertionError("no vars/default.yml in %s" % role)


def common_host(facts):
    """_common_host, the result _common's platform entry point sets before any role reads it (rendered from its
    own vars, as its set_fact task does)."""
    task = next(task for task in load(ROLES / "_common" / "tasks" / "platform.yml")
                if "ansible.builtin.set_fact" in task)
    variables = dict(trusted(common_vars()), ansible_facts=facts)
    return templar(variables).template(trusted(task["ansible.builtin.set_fact"]["_common_host"]))


def nvidia_repo_path(facts, **settings):
    """_nvidia_repo_path, the result of gpufleet.node._nvidia_repo's entry point path (rendered from its own data
    and ``settings`` such as nvidia_repo_url, as its set_fact task does)."""
    task = next(task for task in load(ROLES / "_nvidia_repo" / "tasks" / "path.yml")
                if "ansible.builtin.set_fact" in task)
    return render("_nvidia_repo", facts, task["ansible.builtin.set_fact"]["_nvidia_repo_path"], **settings)


def role_variables(role, facts, **overrides):
    """The role's defaults, vars/main.yml and platform file (trusted, as Ansible loads them), then ``overrides``."""
    variables = {"_common_host": common_host(facts)}
    for path in (ROLES / role / "defaults" / "main.yml", ROLES / role / "vars" / "main.yml", platform_file(role, facts)):
        if path.is_file():
            variables.update(trusted(load(path)))
    variables.update(overrides)
    variables["ansible_facts"] = facts
    return variables


def render(role, facts, expression, **overrides):
    """Template ``expression`` with the role's defaults, vars/main.yml, its platform file and ``overrides``."""
    return templar(role_variables(role, facts, **overrides)).template(trusted(expression))


def find_task(role, file, name):
    """The task named ``name`` in the role's tasks/``file`` (inside a block too), with the conditions of its block."""
    def walk(tasks, inherited):
        for item in tasks or []:
            conditions = inherited + as_list(item.get("when"))
            if item.get("name") == name:
                return dict(item, when=conditions)
            if "block" in item:
                found = walk(item["block"], conditions)
                if found:
                    return found
        return None
    found = walk(load(ROLES / role / "tasks" / file), [])
    if found is None:
        raise AssertionError("no task %r in roles/%s/tasks/%s" % (name, role, file))
    return found


def as_list(value):
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def truth(value):
    """A rendered condition as a bool (ansible-core before 2.19 renders templates to strings)."""
    if isinstance(value, str):
        return value.strip() == "True"
    return bool(value)


def task_fires(role, file, name, facts, **overrides):
    """Whether the task's ``when`` holds (all its conditions) with the role's data, the task's vars and ``overrides``
    (registered results and settings), rendered as Ansible renders them."""
    task = find_task(role, file, name)
    variables = role_variables(role, facts)
    variables.update(trusted(task.get("vars") or {}))
    variables.update(overrides)
    variables["ansible_facts"] = facts
    return all(truth(templar(variables).template(trusted("{{ (%s) }}" % condition))) for condition in task["when"])


def task_message(role, file, name, facts, **overrides):
    """The ``msg`` of a fail or debug task, rendered with the same variables as task_fires, on one line."""
    task = find_task(role, file, name)
    variables = role_variables(role, facts)
    variables.update(trusted(task.get("vars") or {}))
    variables.update(overrides)
    variables["ansible_facts"] = facts
    module = next(value for key, value in task.items() if key.startswith("ansible.builtin."))
    return " ".join(str(templar(variables).template(trusted(module["msg"]))).split())


def render_template(role, name, facts, **overrides):
    """The role's templates/``name`` rendered as the template module renders it (trim_blocks), managed header
    included."""
    variables = role_variables(role, facts, ansible_managed="Ansible managed", **overrides)
    text = (ROLES / role / "templates" / name).read_text(encoding="utf-8")
    return templar(variables).template(trusted(text), escape_backslashes=False,
                                       overrides={"trim_blocks": True, "lstrip_blocks": False})


def apt_stanzas(text):
    """The stanzas of an apt preferences file, in order, as dicts (comments left out)."""
    stanzas = []
    for paragraph in text.split("\n\n"):
        fields = {}
        for line in paragraph.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            key, _sep, value = line.partition(":")
            fields[key.strip()] = value.strip()
        if fields:
            stanzas.append(fields)
    return stanzas


def failures_that_fire(role, file, facts, **overrides):
    """The names of the fail tasks of tasks/``file`` whose ``when`` holds: what the file refuses, whatever its tasks
    are called."""
    names = []
    for task in load(ROLES / role / "tasks" / file):
        if "ansible.builtin.fail" in task and task_fires(role, file, task["name"], facts, **overrides):
            names.append(task["name"])
    return names
