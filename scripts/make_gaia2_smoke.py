"""Write datasets/gaia2-smoke/: three small Gaia2-style scenarios, exported by ARE's own exporter.

Runs with a Python that has ``meta-agents-research-environments==1.2.0`` installed (ARE; e.g. inside
the gaia2 sandbox image), not with the harness's venv, which does not have ARE:

    python scripts/make_gaia2_smoke.py [OUT_DIR]    # default: datasets/gaia2-smoke/

The scenarios are written with ARE's Scenario API and exported with
``JsonScenarioExporter.export_to_json`` (an empty Environment: ``completed_events`` is ``[]``, as in
the Hugging Face rows), then imported again with ``JsonScenarioImporter`` and preprocessed with a
scripted (no LLM) judge, as ARE's benchmark runner does; a scenario that fails is reported and the
script exits 1. They follow Gaia2's rules: the first user message is a USER event with no
dependencies, every ENV event has one predecessor and every oracle event at least one, event
arguments are plain values, every app is one of ARE's, and Contacts holds exactly one user.

- ``proto_find_image_file``: one turn, find the image among six files (Search);
- ``proto_forward_email``: one turn, forward an email that an ENV event delivers 5 s after the
  request (Adaptability);
- ``proto_multi_turn``: two turns, a question then an email to send (Execution).

ARE's exporter stores an oracle event's arguments as ``str(value)``: a list becomes a Python repr its
importer cannot read, and None the string "None"; `fix_oracle_arg_encoding` writes them as JSON. Each
export differs from the last in its action ids (uuid4) and annotation date.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

# Offline: set before ARE is imported. DEMO_FS_PATH: the file system app's fallback for file contents
# (by default a Hugging Face dataset); an empty folder here, the scenarios read no file's contents.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("DEMO_FS_PATH", tempfile.mkdtemp(prefix="gaia2-emptyfs-"))

from are.simulation.apps.agent_user_interface import AgentUserInterface  # noqa: E402
from are.simulation.apps.contacts import Contact, Contacts, Gender, Status  # noqa: E402
from are.simulation.apps.email_client import Email, EmailClientV2, EmailFolderName  # noqa: E402
from are.simulation.apps.sandbox_file_system import SandboxLocalFileSystem  # noqa: E402
from are.simulation.apps.system import SystemApp  # noqa: E402
from are.simulation.data_handler.exporter import JsonScenarioExporter  # noqa: E402
from are.simulation.data_handler.importer import JsonScenarioImporter  # noqa: E402
from are.simulation.environment import Environment, EnvironmentConfig  # noqa: E402
from are.simulation.scenarios.scenario import Scenario  # noqa: E402
from are.simulation.scenarios.scenario_imported_from_json.utils import preprocess_scenario  # noqa: E402
from are.simulation.types import CapabilityTag, EventRegisterer, EventType  # noqa: E402
from are.simulation.validation.configs import ScriptedGraphPerEventJudgeConfig  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "datasets" / "gaia2-smoke"
START = 1728975600.0  # 2024-10-15 07:00:00 UTC, a fixed start time as Gaia2's scenarios have


def contacts() -> Contacts:
    """The user (Alex, the one contact with is_user: ARE's judge needs exactly one) and two others."""
    app = Contacts()
    app.add_contact(Contact(first_name="Alex", last_name="Martin", contact_id="user_alex", is_user=True,
                            email="user@example.com", phone="+33 600 000 000", address="12 Rue de la Paix, Paris",
                            gender=Gender.OTHER, status=Status.EMPLOYED, age=35))
    app.add_contact(Contact(first_name="John", last_name="Doe", contact_id="contact_john", phone="+33 345 678 9120",
                            email="johndoe@example.com", gender=Gender.MALE, status=Status.EMPLOYED, age=20))
    app.add_contact(Contact(first_name="Greg", last_name="Barty", contact_id="contact_greg", phone="+33 291 193 1892",
                            email="gregb@example.com", gender=Gender.MALE, status=Status.EMPLOYED, age=27))
    return app


class ProtoFindImageFile(Scenario):
    """One turn: which of six files is the image (the oracle answers `llama.jpg`)."""

    scenario_id: str = "proto_find_image_file"
    start_time: float | None = START
    duration: float | None = 300

    def init_and_populate_apps(self, *args, **kwargs) -> None:
        files = SandboxLocalFileSystem(sandbox_dir=kwargs.get("sandbox_dir"))
        for i in range(5):
            files.write_text(f"notes_{i}.txt", f"I am notes_{i}.txt !")
        files.write_bytes("llama.jpg", b"I am a binary image !")
        self.apps = [AgentUserInterface(), contacts(), files, SystemApp()]

    def build_events_flow(self) -> None:
        aui = self.get_typed_app(AgentUserInterface)
        with EventRegisterer.capture_mode():
            request = aui.send_message_to_agent(
                content="I need to find the image file in the current directory. Reply with its file name.",
            ).with_type(EventType.USER).depends_on(None, delay_seconds=0).with_id("user_request")
            answer = aui.send_message_to_user(content="The image file is `llama.jpg`").oracle() \
                .depends_on(request, delay_seconds=1).with_id("oracle_response")
        self.events = [request, answer]


class ProtoForwardEmail(Scenario):
    """One turn: Greg's email arrives (an ENV event, 5 s after the request); forward it to John, then say so.
    The oracle names the new email by the Gaia2 placeholder ``{{greg_email}}``."""

    scenario_id: str = "proto_forward_email"
    start_time: float | None = START
    duration: float | None = 300

    def init_and_populate_apps(self, *args, **kwargs) -> None:
        emails = EmailClientV2(name="Emails")
        emails.add_email(Email(sender="newsletter@example.com", recipients=["user@example.com"],
                               subject="Weekly digest", content="Nothing important.", email_id="old_email_1",
                               timestamp=START - 86400), folder_name=EmailFolderName.INBOX)
        self.apps = [AgentUserInterface(), contacts(), emails, SystemApp()]

    def build_events_flow(self) -> None:
        aui = self.get_typed_app(AgentUserInterface)
        emails = self.get_typed_app(EmailClientV2, "Emails")
        with EventRegisterer.capture_mode():
            request = aui.send_message_to_agent(
                content="Greg Barty will email me a list of music in a moment. As soon as it arrives, "
                        "forward that email to John Doe, then tell me.",
            ).with_type(EventType.USER).depends_on(None, delay_seconds=0).with_id("user_request")
            arrives = emails.send_email_to_user_only(
                sender="gregb@example.com", subject="List of music",
                content="Hey, here is the list of music you should listen to: Daft Punk, Air, Justice.",
            ).with_type(EventType.ENV).depends_on(request, delay_seconds=5).with_id("greg_email")
            forward = emails.forward_email(email_id="{{greg_email}}", recipients=["johndoe@example.com"]).oracle() \
                .depends_on(arrives, delay_seconds=2).with_id("oracle_forward")
            done = aui.send_message_to_user(content="Done: I forwarded Greg's 'List of music' email to John Doe.") \
                .oracle().depends_on(forward, delay_seconds=1).with_id("oracle_done")
        self.events = [request, arrives, forward, done]


class ProtoMultiTurn(Scenario):
    """Two turns: John's address, then (the second user message waits for the first answer) an email to him."""

    scenario_id: str = "proto_multi_turn"
    start_time: float | None = START
    duration: float | None = 300

    def init_and_populate_apps(self, *args, **kwargs) -> None:
        self.apps = [AgentUserInterface(), contacts(), EmailClientV2(name="Emails"), SystemApp()]

    def build_events_flow(self) -> None:
        aui = self.get_typed_app(AgentUserInterface)
        emails = self.get_typed_app(EmailClientV2, "Emails")
        with EventRegisterer.capture_mode():
            ask = aui.send_message_to_agent(content="What is John Doe's email address?") \
                .with_type(EventType.USER).depends_on(None, delay_seconds=0).with_id("turn1_user")
            answer = aui.send_message_to_user(content="John Doe's email address is johndoe@example.com.").oracle() \
                .depends_on(ask, delay_seconds=1).with_id("turn1_answer")
            again = aui.send_message_to_agent(
                content="Thanks. Email him with subject 'Dinner' and body 'See you at 7pm.' then confirm.",
            ).with_type(EventType.USER).depends_on(answer, delay_seconds=1).with_id("turn2_user")
            send = emails.send_email(recipients=["johndoe@example.com"], subject="Dinner",
                                     content="See you at 7pm.").oracle() \
                .depends_on(again, delay_seconds=1).with_id("turn2_send_email")
            confirm = aui.send_message_to_user(content="Done, I emailed John Doe.").oracle() \
                .depends_on(send, delay_seconds=1).with_id("turn2_confirm")
        self.events = [ask, answer, again, send, confirm]


SCENARIOS = ((ProtoFindImageFile, CapabilityTag.Search), (ProtoForwardEmail, CapabilityTag.Adaptability),
             (ProtoMultiTurn, CapabilityTag.Execution))


def fix_oracle_arg_encoding(scenario: Scenario) -> None:
    """An oracle event's list and dict arguments as JSON, None as null (the exporter writes str(value))."""
    for event in scenario.events:
        if type(event).__name__ != "OracleEvent" or event.action_desc is None:
            continue
        original = event.make_event(None)
        for arg in event.action_desc.args:
            value = original.action.args.get(arg["name"])
            if isinstance(value, (list, dict)):
                arg["value"] = json.dumps(value)
            elif value is None:
                arg["value"], arg["value_type"] = None, None


def exported(scenario: Scenario) -> str:
    scenario.initialize()
    fix_oracle_arg_encoding(scenario)
    env = Environment(EnvironmentConfig(oracle_mode=True, queue_based_loop=True, start_time=scenario.start_time))
    return JsonScenarioExporter().export_to_json(env=env, scenario=scenario, scenario_id=scenario.scenario_id,
                                                 indent=1)


def import_problem(text: str) -> str | None:
    """What stops ARE's benchmark runner from importing and preprocessing the scenario, or None."""
    try:
        scenario, _, _ = JsonScenarioImporter().import_from_json_to_benchmark(text)
        preprocess_scenario(scenario, judge_config=ScriptedGraphPerEventJudgeConfig())
    except Exception as exc:  # noqa: BLE001 - reported, the script exits 1
        return f"{type(exc).__name__}: {str(exc)[:300]}"
    return None


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for cls, tag in SCENARIOS:
        scenario = cls()
        scenario.tags = (tag,)
        text = exported(scenario)
        problem = import_problem(text)
        (out / f"{scenario.scenario_id}.json").write_text(text)
        print(f"{scenario.scenario_id}: {len(text)} bytes, " + (f"NOT importable: {problem}" if problem else "imports"))
        failed += problem is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
