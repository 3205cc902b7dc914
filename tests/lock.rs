//! The tools lockfile and its semver check: every row of the change table in both
//! directions, at the top, two objects deep, in array items and in tagged enums; removal;
//! description-only changes; 0.y.z tools; the file's bytes; and `<bin> lock` as a real process
//! against a fixture crate built in two variants.

#[path = "harness/mod.rs"]
mod harness;

use oxp_runtime::lock::{Class, Lock, Part, Review};
use serde_json::{Value, json};

/// A lock of one tool version: `schema` as its input or output, or `requirements`.
fn lock(id: &str, input: Value, output: Value, requirements: Value) -> Lock {
    let definition = json!({
        "id": id,
        "description": "A tool.",
        "input_schema": input,
        "output_schema": output,
        "requirements": requirements,
    });
    Lock::parse(&json!({"format": 1, "tools": {id: definition}}).to_string()).unwrap()
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// How a change from `old` to `new` is classed, read back from what the check demands: a
/// breaking change is refused at a new minor, an additive one at the same version, a
/// description-only one nowhere.
fn class_of(old: &Lock, new_at: impl Fn(&str) -> Lock) -> Class {
    let refused = |version: &str| !old.compare(&new_at(version), true).violations.is_empty();
    assert!(!refused("2.0.0"), "a new major version takes any change");
    if refused("1.1.0") {
        Class::Breaking
    } else if refused("1.0.0") {
        Class::Additive
    } else {
        Class::Description
    }
}

/// Where the value under test sits in a schema.
#[derive(Clone, Copy, Debug)]
enum Place {
    Top,
    /// `/properties/outer/properties/inner`: two objects deep.
    Nested,
    /// `/items`: an array's items.
    Items,
}

impl Place {
    fn wrap(self, schema: &Value) -> Value {
        match self {
            Place::Top => schema.clone(),
            Place::Nested => object(
                json!({"outer": object(json!({"inner": schema}), &["inner"])}),
                &["outer"],
            ),
            Place::Items => object(
                json!({"list": {"type": "array", "items": schema}}),
                &["list"],
            ),
        }
    }

    fn pointer(self) -> &'static str {
        match self {
            Place::Top => "",
            Place::Nested => "/properties/outer/properties/inner",
            Place::Items => "/properties/list/items",
        }
    }
}

/// `(row, old, new, input class, output class)`: the change table, a case or more per row.
fn rows() -> Vec<(&'static str, Value, Value, Class, Class)> {
    use Class::{Additive as A, Breaking as B};
    let int = json!({"type": "integer"});
    let num = json!({"type": "number"});
    let ab = object(json!({"a": int, "b": int}), &["a", "b"]);
    vec![
        (
            "property removed",
            ab.clone(),
            object(json!({"a": int}), &["a"]),
            B,
            B,
        ),
        (
            "new required property",
            ab.clone(),
            object(json!({"a": int, "b": int, "c": int}), &["a", "b", "c"]),
            B,
            A,
        ),
        (
            "optional → required",
            object(json!({"a": int, "b": int}), &["a"]),
            ab.clone(),
            B,
            A,
        ),
        (
            "new optional property",
            ab.clone(),
            object(json!({"a": int, "b": int, "c": int}), &["a", "b"]),
            A,
            A,
        ),
        ("type changed", num.clone(), json!({"type": "string"}), B, B),
        ("type narrowed", num.clone(), int.clone(), B, A),
        (
            "null no longer allowed",
            json!({"type": ["string", "null"]}),
            json!({"type": "string"}),
            B,
            A,
        ),
        (
            "enum value removed",
            json!({"type": "string", "enum": ["a", "b"]}),
            json!({"type": "string", "enum": ["a"]}),
            B,
            A,
        ),
        (
            "tighter maximum",
            json!({"type": "integer", "maximum": 10}),
            json!({"type": "integer", "maximum": 5}),
            B,
            A,
        ),
        (
            "tighter minLength",
            json!({"type": "string"}),
            json!({"type": "string", "minLength": 1}),
            B,
            A,
        ),
        (
            "pattern added",
            json!({"type": "string"}),
            json!({"type": "string", "pattern": "^[a-z]+$"}),
            B,
            A,
        ),
        (
            "additionalProperties closed",
            json!({"type": "object", "properties": {"a": int}}),
            json!({"type": "object", "properties": {"a": int}, "additionalProperties": false}),
            B,
            A,
        ),
        ("type widened", int.clone(), num.clone(), A, B),
        (
            "enum value added",
            json!({"type": "string", "enum": ["a"]}),
            json!({"type": "string", "enum": ["a", "b"]}),
            A,
            B,
        ),
        (
            "looser minimum",
            json!({"type": "integer", "minimum": 1}),
            json!({"type": "integer", "minimum": 0}),
            A,
            B,
        ),
        (
            "maxItems removed",
            json!({"type": "array", "items": int, "maxItems": 3}),
            json!({"type": "array", "items": int}),
            A,
            B,
        ),
        (
            "pattern changed: cannot be classified",
            json!({"type": "string", "pattern": "^a"}),
            json!({"type": "string", "pattern": "^b"}),
            B,
            B,
        ),
    ]
}

#[test]
fn every_row_of_the_table_in_both_directions_at_every_depth() {
    for (row, old, new, input, output) in rows() {
        for place in [Place::Top, Place::Nested, Place::Items] {
            let (old, new) = (place.wrap(&old), place.wrap(&new));
            let as_input =
                |id: &str, s: &Value| lock(id, s.clone(), json!({"type": "integer"}), json!({}));
            let as_output =
                |id: &str, s: &Value| lock(id, json!({"type": "object"}), s.clone(), json!({}));
            let found = class_of(&as_input("T.X@1.0.0", &old), |v| {
                as_input(&format!("T.X@{v}"), &new)
            });
            assert_eq!(found, input, "{row} in the input, {place:?}");
            let found = class_of(&as_output("T.X@1.0.0", &old), |v| {
                as_output(&format!("T.X@{v}"), &new)
            });
            assert_eq!(found, output, "{row} in the output, {place:?}");
            // Every line points into the place that changed.
            let review = as_input("T.X@1.0.0", &old).compare(&as_input("T.X@1.0.0", &new), false);
            for violation in &review.violations {
                assert_eq!(violation.part, Part::Input);
                assert!(
                    violation.pointer.starts_with(place.pointer()),
                    "{row}, {place:?}: {violation}"
                );
            }
        }
    }
}

#[test]
fn tagged_enum_variants_are_matched_by_their_tag() {
    let variant = |tag: &str, field: Value| {
        object(
            json!({"kind": {"type": "string", "const": tag}, "size": field}),
            &["kind", "size"],
        )
    };
    let shapes = |variants: Vec<Value>| object(json!({"shape": {"oneOf": variants}}), &["shape"]);
    let int = json!({"type": "integer"});
    let old = shapes(vec![
        variant("circle", int.clone()),
        variant("square", int.clone()),
    ]);
    let as_input = |id: &str, s: &Value| lock(id, s.clone(), json!(null), json!({}));
    let as_output = |id: &str, s: &Value| lock(id, json!({"type": "object"}), s.clone(), json!({}));
    let cases = [
        // Reordered: nothing changed.
        (
            shapes(vec![
                variant("square", int.clone()),
                variant("circle", int.clone()),
            ]),
            None,
        ),
        (
            shapes(vec![variant("circle", int.clone())]),
            Some((Class::Breaking, Class::Additive)),
        ),
        (
            shapes(vec![
                variant("circle", int.clone()),
                variant("square", int.clone()),
                variant("hex", int.clone()),
            ]),
            Some((Class::Additive, Class::Breaking)),
        ),
        (
            shapes(vec![
                variant("circle", json!({"type": "string"})),
                variant("square", int.clone()),
            ]),
            Some((Class::Breaking, Class::Breaking)),
        ),
    ];
    for (new, expected) in cases {
        let input = class_of(&as_input("T.X@1.0.0", &old), |v| {
            as_input(&format!("T.X@{v}"), &new)
        });
        let output = class_of(&as_output("T.X@1.0.0", &old), |v| {
            as_output(&format!("T.X@{v}"), &new)
        });
        let expected = expected.unwrap_or((Class::Description, Class::Description));
        assert_eq!((input, output), expected, "{new}");
    }
    // The line names the variant that went, where it was.
    let review = as_input("T.X@1.0.0", &old).compare(
        &as_input("T.X@1.0.0", &shapes(vec![variant("circle", int)])),
        false,
    );
    assert_eq!(
        review.violations[0].to_string(),
        "T.X@1.0.0: input /properties/shape/oneOf/1: variant kind = \"square\" removed — a published version is immutable; publish it as T.X@2.0.0"
    );
}

#[test]
fn requirements_added_break_and_removed_add() {
    let with = |requirements: Value| {
        move |v: &str| {
            lock(
                &format!("T.X@{v}"),
                json!({"type": "object"}),
                json!(null),
                requirements.clone(),
            )
        }
    };
    let none = json!({});
    let secret = json!({"secrets": [{"id": "API_KEY"}]});
    let user = json!({"user_id": true});
    let github = json!({"authorization": [{"id": "github"}]});
    let scoped = json!({"authorization": [{"id": "github", "oauth2": {"scopes": ["repo"]}}]});
    for (old, new, class) in [
        (&none, &secret, Class::Breaking),
        (&none, &user, Class::Breaking),
        (&none, &github, Class::Breaking),
        (&github, &scoped, Class::Breaking),
        (&secret, &none, Class::Additive),
        (&user, &none, Class::Additive),
        (&scoped, &github, Class::Additive),
    ] {
        assert_eq!(
            class_of(&with(old.clone())("1.0.0"), with(new.clone())),
            class,
            "{old} → {new}"
        );
    }
    let review = with(none)("1.0.0").compare(&with(secret)("1.0.0"), false);
    assert_eq!(
        review.violations[0].to_string(),
        "T.X@1.0.0: requirements /secrets/API_KEY: new secret `API_KEY` — a published version is immutable; publish it as T.X@2.0.0"
    );
}

#[test]
fn descriptions_may_change_in_a_published_version_and_are_listed() {
    let schema = |text: &str| {
        object(
            json!({"a": {"type": "integer", "description": text}}),
            &["a"],
        )
    };
    let old = lock("T.X@1.0.0", schema("The first."), json!(null), json!({}));
    let mut new_definition = old.definition("T.X@1.0.0").unwrap().clone();
    new_definition["input_schema"] = schema("The first addend.");
    new_definition["description"] = json!("A better tool.");
    let new =
        Lock::parse(&json!({"format": 1, "tools": {"T.X@1.0.0": new_definition}}).to_string())
            .unwrap();
    let Review {
        violations,
        notices,
        ..
    } = old.compare(&new, false);
    assert!(violations.is_empty(), "{violations:?}");
    let lines: Vec<String> = notices.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "T.X@1.0.0: input /properties/a: description changed — allowed: a published version's descriptions may change",
            "T.X@1.0.0: description: changed — allowed: a published version's descriptions may change",
        ]
    );
}

#[test]
fn a_locked_version_must_not_disappear_unless_retired() {
    let old = lock(
        "T.X@1.0.0",
        json!({"type": "object"}),
        json!(null),
        json!({}),
    );
    let gone = Lock::default();
    let refused = old.compare(&gone, false);
    assert_eq!(refused.violations.len(), 1);
    assert!(
        refused.violations[0]
            .to_string()
            .starts_with("T.X@1.0.0: removed — a locked version must not disappear"),
        "{}",
        refused.violations[0]
    );
    let retired = old.compare(&gone, true);
    assert!(retired.violations.is_empty());
    assert_eq!(
        retired.notices[0].to_string(),
        "T.X@1.0.0: removed — retired by --allow-removal"
    );
}

#[test]
fn a_new_version_is_judged_against_the_highest_locked_version_below_it() {
    let ab = object(
        json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
        &["a", "b"],
    );
    let a = object(json!({"a": {"type": "integer"}}), &["a"]);
    let tool = |id: &str, input: &Value| {
        let definition = json!({"id": id, "description": "A tool.", "input_schema": input});
        (id.to_owned(), definition)
    };
    let locked = |tools: Vec<(String, Value)>| {
        let tools: serde_json::Map<String, Value> = tools.into_iter().collect();
        Lock::parse(&json!({"format": 1, "tools": tools}).to_string()).unwrap()
    };
    // 1.0.0 and 1.4.0 locked; 1.5.0 drops `b`: judged against 1.4.0, it needs 2.0.0.
    let old = locked(vec![tool("T.X@1.0.0", &ab), tool("T.X@1.4.0", &ab)]);
    let new = locked(vec![
        tool("T.X@1.0.0", &ab),
        tool("T.X@1.4.0", &ab),
        tool("T.X@1.5.0", &a),
    ]);
    let review = old.compare(&new, false);
    assert_eq!(
        review.violations[0].to_string(),
        "T.X@1.5.0: input /properties/b: property `b` removed — a breaking change needs a new major version (judged against the locked T.X@1.4.0); publish it as T.X@2.0.0"
    );
    // At 2.0.0 it is new and valid: listed, not refused.
    let new = locked(vec![
        tool("T.X@1.0.0", &ab),
        tool("T.X@1.4.0", &ab),
        tool("T.X@2.0.0", &a),
    ]);
    let review = old.compare(&new, false);
    assert!(review.violations.is_empty());
    assert_eq!(
        review.notices[0].to_string(),
        "T.X@2.0.0: new, not yet locked: run `<bin> lock` — its changes since T.X@1.4.0 fit the version"
    );
}

#[test]
fn a_zero_major_tool_breaks_with_a_new_minor() {
    let old = lock(
        "T.X@0.3.0",
        json!({"type": "integer"}),
        json!(null),
        json!({}),
    );
    let at = |v: &str| {
        lock(
            &format!("T.X@{v}"),
            json!({"type": "string"}),
            json!(null),
            json!({}),
        )
    };
    let patch = old.compare(&at("0.3.1"), true);
    assert_eq!(
        patch.violations[0].to_string(),
        "T.X@0.3.1: input: type integer → string — a breaking change to a 0.y.z tool needs a new minor version (judged against the locked T.X@0.3.0); publish it as T.X@0.4.0"
    );
    assert!(old.compare(&at("0.4.0"), true).violations.is_empty());
}

#[test]
fn the_file_is_the_same_bytes_for_the_same_tools() {
    let registry = oxp_tests::all_tools().build().unwrap();
    let (first, second) = (Lock::of(&registry).to_text(), Lock::of(&registry).to_text());
    assert_eq!(first, second);
    let dir = tempdir();
    let path = dir.join("tools.lock");
    Lock::of(&registry).write(&path).unwrap();
    let read = Lock::read(&path).unwrap();
    assert_eq!(
        read.to_text(),
        first,
        "read back and written again: identical"
    );
    assert!(read.check(&registry).is_empty());
    // Ids in order, keys in order at every level.
    let ids: Vec<&str> = read.ids().collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(ids, sorted);
    assert!(first.ends_with("}\n"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_broken_lockfile_is_a_clear_error() {
    for (text, says) in [
        ("not json", "not a tools lockfile"),
        (r#"{"format": 3, "tools": {}}"#, "this version reads 1 to 2"),
        (
            r#"{"format": 2, "tools": {"Calc.Add@1.0.0": {"scopes": "files:write"}}}"#,
            "`Calc.Add@1.0.0`'s `scopes` is not a list of strings",
        ),
        (r#"{"format": 1, "tools": []}"#, "`tools` is not an object"),
        (
            r#"{"format": 1, "tools": {"Calc.Add@1": {}}}"#,
            "is not a tool id with its version",
        ),
        (
            r#"{"format": 1, "tools": {"Calc.Add@1.0.0": 5}}"#,
            "has no definition",
        ),
    ] {
        let error = Lock::parse(text).unwrap_err().to_string();
        assert!(error.contains(says), "{text}: {error}");
    }
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "oxp-lock-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `lock-fixture`, built in variant `v1` (no features) or `v2`, copied out so both can run.
fn fixture(variant: &str, into: &std::path::Path) -> std::path::PathBuf {
    // Built with this package, as the harness builds the example: the same features of the
    // runtime, so nothing but the fixture compiles.
    let mut args = vec!["-p", "lock-fixture", "-p", "oxp-tests"];
    if variant == "v2" {
        args.extend(["--features", "lock-fixture/v2"]);
    }
    let target = harness::cargo_build(&args);
    let copy = into.join(format!("lock-fixture-{variant}"));
    std::fs::copy(target.join("debug/lock-fixture"), &copy).unwrap();
    copy
}

fn run(binary: &std::path::Path, dir: &std::path::Path, args: &[&str]) -> (i32, String) {
    let output = std::process::Command::new(binary)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the fixture runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.code().expect("exited"), text)
}

#[test]
fn the_lock_command_as_a_real_process() {
    let dir = tempdir();
    let (v1, v2) = (fixture("v1", &dir), fixture("v2", &dir));

    // No lock yet: checking is a usage error; locking writes one.
    let (code, out) = run(&v1, &dir, &["lock", "--check"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("no lockfile at tools.lock"), "{out}");
    let (code, out) = run(&v1, &dir, &["lock"]);
    assert_eq!(
        (code, out.trim()),
        (
            0,
            "tools.lock: 2 tools, 2 new, 0 changed since the previous lock"
        )
    );
    let written = std::fs::read(dir.join("tools.lock")).unwrap();
    let (code, _) = run(&v1, &dir, &["lock"]);
    assert_eq!(code, 0);
    assert_eq!(
        std::fs::read(dir.join("tools.lock")).unwrap(),
        written,
        "two runs, the same bytes"
    );
    let (code, out) = run(&v1, &dir, &["lock", "--check"]);
    assert_eq!(
        (code, out.trim()),
        (0, "tools.lock: 2 tools locked, 0 violations")
    );

    // v2 changes `b` of the published Calculator.Add@1.0.0 and drops Legacy.Echo@1.0.0.
    let (code, out) = run(&v2, &dir, &["lock", "--check"]);
    assert_eq!(code, 1, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines.contains(&"Calculator.Add@1.0.0: input /properties/b: type number → string — a published version is immutable; publish it as Calculator.Add@2.0.0"),
        "{out}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l
                .starts_with("Legacy.Echo@1.0.0: removed — a locked version must not disappear")),
        "{out}"
    );
    assert!(
        lines.contains(&"tools.lock: 2 tools locked, 2 violations"),
        "{out}"
    );
    // Locking refuses to record the break, and leaves the file alone.
    let (code, out) = run(&v2, &dir, &["lock", "--allow-removal"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("tools.lock not written: 1 change would break"),
        "{out}"
    );
    assert_eq!(std::fs::read(dir.join("tools.lock")).unwrap(), written);

    // Another path, and bad arguments.
    let (code, out) = run(&v1, &dir, &["lock", "--path", "api.lock"]);
    assert_eq!(code, 0, "{out}");
    assert!(dir.join("api.lock").exists());
    let (code, out) = run(&v1, &dir, &["lock", "--frobnicate"]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("unexpected argument `--frobnicate` to `lock`"),
        "{out}"
    );
    // A path that is a directory: a file error, not a crash and not a lock written inside it.
    for args in [
        &["lock", "--path", "."][..],
        &["lock", "--check", "--path", "."],
    ] {
        let (code, out) = run(&v1, &dir, args);
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(out.contains("cannot read ."), "{out}");
    }
    std::fs::write(dir.join("broken.lock"), "{").unwrap();
    let (code, out) = run(&v1, &dir, &["lock", "--check", "--path", "broken.lock"]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("cannot read broken.lock: not a tools lockfile"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

mod scoped {
    use oxp_runtime::{prompt, resource, tool};

    /// Write a file.
    #[tool(toolkit = "Files", name = "Write", version = "1.0.0")]
    pub fn open(path: String) -> String {
        path
    }

    /// Write a file.
    #[tool(toolkit = "Files", name = "Write", version = "1.0.0", scopes = ["files:write"])]
    pub fn same_version(path: String) -> String {
        path
    }

    /// Write a file.
    #[tool(toolkit = "Files", name = "Write", version = "1.1.0", scopes = ["files:write"])]
    pub fn minor(path: String) -> String {
        path
    }

    /// Write a file.
    #[tool(toolkit = "Files", name = "Write", version = "2.0.0", scopes = ["files:write"])]
    pub fn major(path: String) -> String {
        path
    }

    /// Write a file.
    #[tool(toolkit = "Files", name = "Write", version = "1.1.0")]
    pub fn minor_open(path: String) -> String {
        path
    }

    /// Today's notes.
    #[resource(uri = "notes://today")]
    pub fn notes() -> String {
        String::new()
    }

    /// Today's notes.
    #[resource(uri = "notes://today", scopes = ["notes:read"])]
    pub fn notes_scoped() -> String {
        String::new()
    }

    /// Review a change.
    #[prompt(name = "review")]
    pub fn review(
        /// The change.
        change: String,
    ) -> String {
        change
    }

    /// Review a change.
    #[prompt(name = "review", scopes = ["reviews"])]
    pub fn review_scoped(
        /// The change.
        change: String,
    ) -> String {
        change
    }
}

/// The scopes a caller's token needs are part of what was published: a tool version, resource
/// or prompt that comes to need one refuses callers it served (breaking: a new major version
/// for a tool, never for a resource or prompt); one that stops needing one refuses nobody.
#[test]
fn scopes_added_break_and_dropped_add() {
    use oxp_runtime::Registry;
    let of = |registry: oxp_runtime::RegistryBuilder| Lock::of(&registry.build().unwrap());
    let lines = |review: Review| -> (Vec<String>, Vec<String>) {
        let text = |found: &[oxp_runtime::lock::Violation]| -> Vec<String> {
            found.iter().map(ToString::to_string).collect()
        };
        (text(&review.violations), text(&review.notices))
    };
    let open = of(Registry::builder()
        .tool(scoped::open::TOOL)
        .resource(scoped::notes::RESOURCE)
        .prompt(scoped::review::PROMPT));
    let text = open.to_text();
    assert!(
        !text.contains("\"scopes\""),
        "none written when none: {text}"
    );

    // The same version, now needing a scope: immutable.
    let (violations, _) = lines(open.compare(
        &of(Registry::builder().tool(scoped::same_version::TOOL)),
        true,
    ));
    assert_eq!(
        violations,
        [
            "Files.Write@1.0.0: scopes /scopes/files:write: callers now need scope `files:write` — a published version is immutable; publish it as Files.Write@2.0.0"
        ]
    );
    // A new minor version that needs it: breaking; a new major: fine.
    let (violations, _) =
        lines(open.compare(&of(Registry::builder().tool(scoped::minor::TOOL)), true));
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(
        violations[0].contains("a breaking change needs a new major version"),
        "{violations:?}"
    );
    let (violations, _) =
        lines(open.compare(&of(Registry::builder().tool(scoped::major::TOOL)), true));
    assert!(violations.is_empty(), "{violations:?}");

    // Needing one no longer: additive, a new minor is enough.
    let scoped_tool = of(Registry::builder().tool(scoped::same_version::TOOL));
    assert!(
        scoped_tool
            .to_text()
            .contains("\"scopes\": [\n        \"files:write\"\n      ]")
    );
    let (violations, _) = lines(scoped_tool.compare(
        &of(Registry::builder().tool(scoped::minor_open::TOOL)),
        true,
    ));
    assert!(violations.is_empty(), "{violations:?}");
    let (violations, _) = lines(scoped_tool.compare(&open, true));
    assert_eq!(
        violations.len(),
        1,
        "dropped in the same version: {violations:?}"
    );

    // A resource or prompt has no version to publish the change under.
    let scoped_others = of(Registry::builder()
        .tool(scoped::open::TOOL)
        .resource(scoped::notes_scoped::RESOURCE)
        .prompt(scoped::review_scoped::PROMPT));
    let (violations, _) = lines(open.compare(&scoped_others, false));
    assert_eq!(
        violations,
        [
            "resource notes://today: /scopes/notes:read: callers now need scope `notes:read` — a resource or prompt has no version to publish a change under: what was published holds while it is served",
            "prompt review: /scopes/reviews: callers now need scope `reviews` — a resource or prompt has no version to publish a change under: what was published holds while it is served",
        ]
    );
    let (violations, notices) = lines(scoped_others.compare(&open, false));
    assert!(violations.is_empty(), "{violations:?}");
    assert!(
        notices
            .iter()
            .any(|n| n.contains("callers no longer need scope `notes:read`")),
        "{notices:?}"
    );
    // Read back, the file says the same.
    assert_eq!(
        Lock::parse(&scoped_others.to_text()).unwrap(),
        scoped_others
    );

    // A lock written before scopes were recorded (format 1) says nothing of them: a scoped
    // tool checked against it is not taken for one that came to need them.
    let older = open.to_text().replace("\"format\": 2", "\"format\": 1");
    let older = Lock::parse(&older).unwrap();
    let (violations, _) = lines(older.compare(&scoped_tool, true));
    assert!(violations.is_empty(), "{violations:?}");
    let (violations, _) = lines(scoped_tool.compare(&older, false));
    assert!(violations.is_empty(), "{violations:?}");
    // Written back, it still says it records no scopes.
    assert!(older.to_text().contains("\"format\": 1"));
    assert_eq!(Lock::parse(&older.to_text()).unwrap(), older);
}
