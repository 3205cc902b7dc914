//! The guide's settings table (`docs/settings.md`) is the list the parser reads
//! (`oxp_runtime::app::SETTINGS`): every variable, its default and its meaning, word for word,
//! so that the two cannot drift. `BLESS=1` rewrites the guide's table from the list.

use oxp_runtime::app::{SETTINGS, SETTINGS_TABLE, SettingDefault};

const GUIDE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/settings.md");
const BEGIN: &str = "<!-- settings table: begin -->\n";
const END: &str = "<!-- settings table: end -->";

/// The guide's table: what lies between its markers.
fn guide_table(guide: &str) -> (usize, usize) {
    let begin = guide
        .find(BEGIN)
        .expect("docs/settings.md marks its table's beginning")
        + BEGIN.len();
    let end = guide
        .find(END)
        .expect("docs/settings.md marks its table's end");
    assert!(begin <= end, "the table's markers are in order");
    (begin, end)
}

#[test]
fn the_guide_s_table_is_the_list() {
    let guide = std::fs::read_to_string(GUIDE).expect("docs/settings.md");
    let (begin, end) = guide_table(&guide);
    if std::env::var_os("BLESS").is_some() {
        let blessed = format!("{}{SETTINGS_TABLE}{}", &guide[..begin], &guide[end..]);
        std::fs::write(GUIDE, blessed).unwrap();
        return;
    }
    let table = &guide[begin..end];
    // Each variable first, for a failure that names it.
    for setting in SETTINGS {
        let default = match setting.default {
            SettingDefault::Unset => "–".to_owned(),
            SettingDefault::Value(value) => format!("`{value}`"),
            SettingDefault::Derived(text) => text.to_owned(),
            _ => unreachable!("a new kind of default"),
        };
        let row = format!("| `{}` | {default} | {}", setting.name, setting.meaning);
        assert!(
            table.lines().any(|line| line.starts_with(&row)),
            "docs/settings.md has no row for {} with its default and meaning as SETTINGS has \
             them:\n{row}\n(BLESS=1 cargo test -p oxp-tests --test settings rewrites the table)",
            setting.name
        );
    }
    assert_eq!(
        table, SETTINGS_TABLE,
        "docs/settings.md's table differs from SETTINGS (BLESS=1 cargo test -p oxp-tests --test \
         settings rewrites it)"
    );
}

/// README points to the guide's table rather than keeping a copy of its own to drift.
#[test]
fn the_readme_links_the_table_and_keeps_no_copy() {
    let readme = include_str!("../README.md");
    assert!(
        readme.contains("(docs/settings.md)"),
        "README links docs/settings.md"
    );
    let copied: Vec<&str> = (readme.lines())
        .filter(|line| line.starts_with("| `OXP_"))
        .collect();
    assert!(copied.is_empty(), "README keeps settings rows: {copied:?}");
}
