"""canvas_local.template expands Fn::ForEach as the AWS::LanguageExtensions transform does: the embedded stack
and the checks read the functions, log groups and alarms the loops generate under their usual logical ids."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from canvas_local.template import Template, TemplateError, expand_for_each, load_yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]

LOOP_TEMPLATE = """
Parameters:
  Colours:
    Type: CommaDelimitedList
    Default: "red, green"
Mappings:
  Code:
    Alpha: {CodeUri: functions/alpha/}
    Beta: {CodeUri: functions/beta/}
Globals:
  Function:
    Handler: app.handler
    Timeout: 29
Resources:
  Fn::ForEach::Functions:
    - Name
    - [Alpha, Beta]
    - ${Name}Function:
        Type: AWS::Serverless::Function
        Properties:
          Description: Runs ${Name}
          CodeUri: !FindInMap [Code, !Ref Name, CodeUri]
          Environment:
            Variables:
              OWN_NAME: !Ref Name
              OWN_ARN: !Sub "${${Name}Function.Arn}"
      ${Name}FunctionLogGroup:
        Type: AWS::Logs::LogGroup
  Fn::ForEach::Topics:
    - Colour
    - !Ref Colours
    - Fn::ForEach::Sizes:
        - Size
        - [small, large.x]
        - Topic&{Colour}&{Size}:
            Type: AWS::SNS::Topic
            Properties:
              TopicName: ${Colour}-${Size}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "template.yaml"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def loop_template(tmp_path: Path) -> Template:
    path = write(tmp_path, LOOP_TEMPLATE)
    for name in ("alpha", "beta"):
        folder = tmp_path / "functions" / name
        folder.mkdir(parents=True)
        (folder / "app.py").write_text(f"def handler(event, context):\n    return '{name}'\n")
    return Template(path)


def test_a_loop_generates_one_entry_per_item_with_the_identifier_filled_in(loop_template):
    # Given a loop over two names whose body holds a function and its log group
    resources = loop_template.resources

    # Then each name has both, under logical ids made from it, with ${Name} and !Ref Name replaced
    assert {"AlphaFunction", "AlphaFunctionLogGroup", "BetaFunction", "BetaFunctionLogGroup"} <= set(resources)
    alpha = resources["AlphaFunction"]["Properties"]
    assert alpha["Description"] == "Runs Alpha"
    assert alpha["CodeUri"] == {"Fn::FindInMap": ["Code", "Alpha", "CodeUri"]}
    assert alpha["Environment"]["Variables"]["OWN_NAME"] == "Alpha"
    assert alpha["Environment"]["Variables"]["OWN_ARN"] == {"Fn::Sub": "${AlphaFunction.Arn}"}
    assert not any(key.startswith("Fn::ForEach::") for key in resources)


def test_generated_functions_run_from_the_folder_their_mapping_names(loop_template):
    # When the stack reads the generated functions
    functions = {f.logical_id: f for f in loop_template.functions()}

    # Then each has its own folder (Fn::FindInMap resolved) and the globals, and loads its own handler
    assert functions["BetaFunction"].code_dir.name == "beta"
    assert functions["BetaFunction"].timeout_seconds == 29
    assert functions["BetaFunction"].load_handler()({}, None) == "beta"
    assert (
        functions["AlphaFunction"].environment["OWN_ARN"]
        == "arn:aws:lambda:us-east-1:123456789012:function:AlphaFunction"
    )


def test_nested_loops_over_a_parameter_list_strip_non_alphanumerics_from_logical_ids(loop_template):
    # Given a loop over a CommaDelimitedList parameter with a loop nested in its body
    topics = {k: v for k, v in loop_template.resources.items() if v["Type"] == "AWS::SNS::Topic"}

    # Then every pair is generated; &{} drops the "." of an item, ${} keeps it
    assert set(topics) == {"Topicredsmall", "Topicredlargex", "Topicgreensmall", "Topicgreenlargex"}
    assert topics["Topicgreenlargex"]["Properties"]["TopicName"] == "green-large.x"


def test_parameter_overrides_reach_the_collection(tmp_path):
    # Given the Colours parameter overridden with one colour
    template = Template(write(tmp_path, LOOP_TEMPLATE), {"Colours": "blue"})

    # Then the loop generates that colour's topics only
    topics = sorted(k for k, v in template.resources.items() if v["Type"] == "AWS::SNS::Topic")
    assert topics == ["Topicbluelargex", "Topicbluesmall"]


def test_loops_in_conditions_outputs_and_properties_are_expanded():
    # Given loops in Conditions, Outputs and a resource's Properties
    document = {
        "Conditions": {"Fn::ForEach::Is": ["Env", ["dev", "prod"], {"Is${Env}": {"Fn::Equals": ["a", "${Env}"]}}]},
        "Resources": {
            "Bucket": {
                "Type": "AWS::S3::Bucket",
                "Properties": {"Fn::ForEach::Tags": ["Key", ["A"], {"Tag${Key}": "${Key}"}], "Kept": 1},
            }
        },
        "Outputs": {"Fn::ForEach::Out": ["Env", ["dev"], {"Out${Env}": {"Value": {"Ref": "Env"}}}]},
    }

    # When they are expanded
    expanded = expand_for_each(document)

    # Then each section has what its loop generates
    assert expanded["Conditions"] == {"Isdev": {"Fn::Equals": ["a", "dev"]}, "Isprod": {"Fn::Equals": ["a", "prod"]}}
    assert expanded["Resources"]["Bucket"]["Properties"] == {"TagA": "A", "Kept": 1}
    assert expanded["Outputs"] == {"Outdev": {"Value": "dev"}}
    # And the document it was given is left as it was
    assert "Fn::ForEach::Is" in document["Conditions"]


def test_a_template_without_loops_comes_back_unchanged():
    document = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}

    assert expand_for_each(document) is document


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        ({"Fn::ForEach::L": ["X", ["A"]]}, "layout is incorrect"),
        ({"Fn::ForEach::L": ["", ["A"], {"R${X}": {}}]}, "non-empty string"),
        ({"Fn::ForEach::L": ["X", "A,B", {"R${X}": {}}]}, "collection must be a list"),
        ({"Fn::ForEach::L": ["X", [{"Ref": "Other"}], {"R${X}": {}}]}, "must be strings"),
        ({"RA": {}, "Fn::ForEach::L": ["X", ["A"], {"R${X}": {}}]}, "RA, which is already defined"),
        ({"Fn::ForEach::L": ["X", ["A", "A"], {"R${X}": {}}]}, "generates RA twice"),
        ({"Fn::ForEach::L": ["Stage", ["A"], {"R${Stage}": {}}]}, "identifier Stage is also a parameter"),
        ({"Fn::ForEach::Stage": ["X", ["A"], {"R${X}": {}}]}, "loop name Stage is also a parameter"),
        (
            {"Fn::ForEach::L": ["X", ["A"], {"Fn::ForEach::M": ["X", ["B"], {"R${X}": {}}]}]},
            "also an enclosing loop's",
        ),
    ],
)
def test_a_malformed_loop_is_an_error(resources, message):
    document = {"Parameters": {"Stage": {"Type": "String", "Default": "dev"}}, "Resources": resources}

    with pytest.raises(TemplateError, match=message):
        expand_for_each(document)


def test_loops_nest_five_levels_at_most():
    body: dict = {"R${L5}": {"Type": "AWS::SNS::Topic"}}
    for level in range(6, 0, -1):
        body = {f"Fn::ForEach::Loop{level}": [f"L{level}", ["a"], body]}

    with pytest.raises(TemplateError, match="more than 5 levels"):
        expand_for_each({"Resources": body})


def test_the_service_template_declares_each_block_function_once_under_its_usual_logical_id():
    # Given template.yaml as the embedded stack reads it
    template = Template(ROOT / "template.yaml")
    raw = load_yaml(ROOT / "template.yaml")
    block_names = raw["Resources"]["Fn::ForEach::BlockFunctions"][1]

    # Then each block function exists under <Name>BlockFunction, with its folder, log group and alarms
    functions = {f.logical_id: f for f in template.functions()}
    for name in block_names:
        function = functions[f"{name}BlockFunction"]
        assert (function.code_dir / "app.py").is_file()
        for suffix in ("LogGroup", "ErrorsAlarm", "ThrottlesAlarm"):
            assert f"{name}BlockFunction{suffix}" in template.resources
    assert len({f.code_dir for f in functions.values()}) == len(functions)
    # And the mapping has a folder for every name of the loop, and no other
    assert set(raw["Mappings"]["BlockFunctions"]) == set(block_names)
    # And the expansion is what `sam` and CloudFormation read: plain JSON, no loop left
    assert "Fn::ForEach" not in json.dumps(template.document["Resources"])


def test_the_language_extensions_intrinsics_resolve(tmp_path):
    # Given Fn::ToJsonString, Fn::Length and Fn::FindInMap with a DefaultValue
    template = Template(
        write(
            tmp_path,
            """
            Mappings:
              Types: {Prompt: {Arn: a1}}
            Resources:
              Queue:
                Type: AWS::SQS::Queue
            """,
        )
    )

    # Then they resolve as CloudFormation resolves them
    assert template.resolve({"Fn::ToJsonString": {"prompt-block": {"Ref": "Queue"}}}) == '{"prompt-block":"Queue"}'
    assert template.resolve({"Fn::Length": [1, 2, 3]}) == 3
    assert template.resolve({"Fn::FindInMap": ["Types", "Prompt", "Arn"]}) == "a1"
    assert template.resolve({"Fn::FindInMap": ["Types", "Web", "Arn", {"DefaultValue": "none"}]}) == "none"
    with pytest.raises(TemplateError, match="finds nothing"):
        template.resolve({"Fn::FindInMap": ["Types", "Web", "Arn"]})


def test_the_command_line_prints_the_expanded_template(capsys):
    # When the module is run on template.yaml
    from canvas_local.template import main

    main([str(ROOT / "template.yaml")])

    # Then it prints JSON with the generated resources and no loop left
    printed = json.loads(capsys.readouterr().out)
    assert "PromptBlockFunction" in printed["Resources"]
    assert not any(key.startswith("Fn::ForEach::") for key in printed["Resources"])


def test_every_function_of_the_service_has_errors_and_throttles_alarms():
    # Given the functions of template.yaml, loops expanded
    template = Template(ROOT / "template.yaml")
    functions = template.of_type("AWS::Serverless::Function")

    # Then each has an alarm on its errors and one on its throttles, on its own name
    for name in functions:
        for metric in ("Errors", "Throttles"):
            alarm = template.resources.get(f"{name}{metric}Alarm")
            assert alarm is not None, f"{name} has no {metric} alarm (add it to Fn::ForEach::FunctionAlarms)"
            # A metric-math alarm (Plan Canvas's errors, less its review hand-offs) reads the function's metric too.
            stats = [m["MetricStat"]["Metric"] for m in alarm["Properties"].get("Metrics", []) if "MetricStat" in m]
            [watched] = [s for s in stats if s["Namespace"] == "AWS/Lambda"] or [alarm["Properties"]]
            assert watched["MetricName"] == metric
            [dimension] = watched["Dimensions"]
            assert template.resolve(dimension["Value"]) == template.function_name(name)
