//! `redis/users.acl`: one least-privilege Redis user per role, and its deploy-time rendering with real password hashes.
//!
//! The generated file carries placeholders (`#<sha256:VARIABLE>`), never a
//! secret, and comments, which Redis refuses in an ACL file. `render` turns
//! it into a loadable file where it is deployed: comments out, each
//! placeholder replaced by the SHA-256 of the password(s) in its variable.

use queuegen_runtime::roles::Role;
use serde::Serialize;

use super::sha256_hex;
use crate::error::Result;
use crate::gen::functions::{library_name, library_name_at, LIBRARY_VERSION};
use crate::gen::templates::render as render_template;
use crate::gen::{header_in, CommentSyntax, GeneratedFile};
use crate::spec::model::{Spec, TrimMode};

/// Where the users file goes, relative to the deploy directory.
pub const FILE_NAME: &str = "redis/users.acl";

const PLACEHOLDER_OPEN: &str = "#<sha256:";

#[derive(Serialize)]
struct User {
    role: &'static str,
    purpose: &'static str,
    name: String,
    password_variable: String,
    rules: Vec<String>,
}

/// The ACL user name of `role` in `service`: `<service>-<role>`.
pub fn user_name(service: &str, role: Role) -> String {
    format!("{service}-{}", role.name())
}

/// The environment variable `render` reads the role's password from:
/// `<SERVICE>_<ROLE>_PASSWORD`, upper case, `-` as `_`.
pub fn password_variable(service: &str, role: Role) -> String {
    format!("{service}_{}_password", role.name())
        .replace('-', "_")
        .to_uppercase()
}

/// The libraries whose functions the users may call: this release's and the
/// previous one, so that a rolling deploy keeps the old workers running.
pub fn libraries(service: &str) -> Vec<String> {
    let mut libraries = vec![library_name(service)];
    if LIBRARY_VERSION > 1 {
        libraries.push(library_name_at(service, LIBRARY_VERSION - 1));
    }
    libraries
}

/// The ACL rules of `role` for `spec`, after the name and password. The
/// worker may `XTRIM` only when a queue trims in its workers
/// (`retention.trim: in_process`): otherwise the trim CronJob trims, as the
/// operator, and no worker can cut a stream short. Rules naming a command
/// `server` lacks are left out (the users file is written for
/// [`ServerCommands::ALL`]; `render` drops what the target server lacks).
pub fn rules(spec: &Spec, role: Role, server: ServerCommands) -> Vec<String> {
    let mut rules = role.acl_rules(&spec.redis.key_prefix, &libraries(&spec.service), server);
    let workers_trim = spec
        .queues
        .iter()
        .any(|queue| queue.retention.trim == TrimMode::InProcess);
    if role == Role::Worker && !workers_trim {
        rules.retain(|rule| rule != "+xtrim");
    }
    rules
}

pub fn generate(spec: &Spec, spec_file: &str) -> Result<GeneratedFile> {
    let users: Vec<User> = Role::ALL
        .iter()
        .map(|&role| User {
            role: role.name(),
            purpose: role.purpose(),
            name: user_name(&spec.service, role),
            password_variable: password_variable(&spec.service, role),
            rules: rules(spec, role, ServerCommands::ALL),
        })
        .collect();
    let libraries = libraries(&spec.service);
    let contents = render_template(
        "users.acl",
        minijinja::context! {
            header => header_in(CommentSyntax::Hash, spec_file),
            service => &spec.service,
            key_prefix => &spec.redis.key_prefix,
            library => &libraries[0],
            previous_library => libraries.get(1).unwrap_or(&libraries[0]),
            users,
        },
    )?;
    Ok(GeneratedFile::new(FILE_NAME, contents))
}

/// Why a users file could not be rendered; each names the line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RenderError {
    #[error("line {line}: the password variable {variable} is not set; export it (one password per line) before rendering")]
    MissingPassword { line: usize, variable: String },
    #[error("line {line}: the password variable {variable} holds no password; an empty password would let anyone in")]
    EmptyPassword { line: usize, variable: String },
    #[error("line {line}: unterminated placeholder `{text}`; expected #<sha256:VARIABLE>")]
    BadPlaceholder { line: usize, text: String },
}

/// What the target server has, where a rule depends on it.
pub use queuegen_runtime::roles::ServerCommands;

/// The loadable ACL file: comment and blank lines dropped, each
/// `#<sha256:VARIABLE>` replaced by `#<hex sha256>` of each line of the
/// variable's value (from `lookup`), then `extra`'s lines (your own users,
/// e.g. an administrator), also without comments. Rules that need a command
/// `features` says the server lacks are left out.
pub fn render(
    generated: &str,
    extra: &[String],
    server: ServerCommands,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, RenderError> {
    let mut out = String::new();
    for (index, line) in generated.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || (trimmed.starts_with('#')) {
            continue;
        }
        let mut rendered = Vec::new();
        for word in trimmed.split_whitespace() {
            if word
                .strip_prefix('+')
                .is_some_and(|command| !server.has(command))
            {
                continue;
            }
            let Some(rest) = word.strip_prefix(PLACEHOLDER_OPEN) else {
                rendered.push(word.to_owned());
                continue;
            };
            let line = index + 1;
            let Some(variable) = rest.strip_suffix('>') else {
                return Err(RenderError::BadPlaceholder {
                    line,
                    text: word.to_owned(),
                });
            };
            let value = lookup(variable).ok_or_else(|| RenderError::MissingPassword {
                line,
                variable: variable.to_owned(),
            })?;
            let passwords: Vec<&str> = value.lines().filter(|p| !p.is_empty()).collect();
            if passwords.is_empty() {
                return Err(RenderError::EmptyPassword {
                    line,
                    variable: variable.to_owned(),
                });
            }
            rendered.extend(passwords.iter().map(|p| format!("#{}", sha256_hex(p))));
        }
        out.push_str(&rendered.join(" "));
        out.push('\n');
    }
    for text in extra {
        for line in text.lines().map(str::trim) {
            if !line.is_empty() && !line.starts_with('#') {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        crate::spec::check_file(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/docs-pipeline/queues.yaml"
        )))
        .expect("the example spec is readable")
        .spec
        .expect("the example spec is valid")
    }

    #[test]
    fn one_user_per_role_with_a_placeholder_and_no_secret() {
        let file = generate(&spec(), "../queues.yaml").unwrap().contents;
        let users: Vec<&str> = file.lines().filter(|l| l.starts_with("user ")).collect();
        assert_eq!(users.len(), Role::ALL.len() + 1, "{file}");
        for role in Role::ALL {
            let line = users
                .iter()
                .find(|l| l.starts_with(&format!("user docs-pipeline-{} ", role.name())))
                .unwrap_or_else(|| panic!("no {} user in\n{file}", role.name()));
            let variable = format!("DOCS_PIPELINE_{}_PASSWORD", role.name().to_uppercase());
            assert!(
                line.contains(&format!(" on #<sha256:{variable}> ")),
                "{line}"
            );
            assert!(!line.contains(" >"), "a literal password in {line}");
            assert!(!line.contains("+@"), "a whole category in {line}");
        }
        assert!(file.contains("user default off resetpass"));
    }

    #[test]
    fn functions_are_allowed_by_name_for_this_and_the_previous_library() {
        let file = generate(&spec(), "../queues.yaml").unwrap().contents;
        let worker = file
            .lines()
            .find(|l| l.starts_with("user docs-pipeline-worker "))
            .unwrap();
        let ack = |version: u32| format!(" +fcall|qg_docs_pipeline_v{version}_ack ");
        assert!(worker.contains(&ack(LIBRARY_VERSION)), "{worker}");
        assert!(worker.contains(&ack(LIBRARY_VERSION - 1)), "{worker}");
        assert!(
            !worker.contains(" +fcall "),
            "FCALL of any function: {worker}"
        );
        assert!(!worker.contains("_replay"), "the worker replays: {worker}");
    }

    /// `redis.call('X'` / `redis.pcall('X', 'SUB'` in the library, as ACL
    /// names: Redis checks what a Function calls against the caller's ACL.
    fn library_commands(library: &str) -> std::collections::BTreeSet<String> {
        let mut found = std::collections::BTreeSet::new();
        for call in ["redis.call('", "redis.pcall('"] {
            for (at, _) in library.match_indices(call) {
                let rest = &library[at + call.len()..];
                let name = rest[..rest.find('\'').unwrap()].to_lowercase();
                let after = &rest[name.len() + 1..];
                let sub = after
                    .strip_prefix(", '")
                    .and_then(|r| r.find('\'').map(|e| r[..e].to_lowercase()));
                found.insert(match sub {
                    Some(sub) if ["xinfo", "memory", "xgroup"].contains(&name.as_str()) => {
                        format!("{name}|{sub}")
                    }
                    _ => name,
                });
            }
        }
        found
    }

    #[test]
    fn roles_that_call_the_library_may_run_every_command_inside_it() {
        let library = crate::gen::functions::generate(&spec(), "q.yaml")
            .unwrap()
            .contents;
        let inside = library_commands(&library);
        assert!(inside.len() > 15, "{inside:?}");
        for role in [Role::Worker, Role::Operator] {
            let commands = role.commands();
            for command in &inside {
                assert!(
                    commands.contains(&command.as_str()),
                    "the library calls {command}, which the {} role lacks",
                    role.name()
                );
            }
        }
    }

    #[test]
    fn render_hashes_each_password_line_and_drops_comments() {
        let generated = "# header\n\nuser a on #<sha256:A_PASSWORD> ~k:* -@all +get\n";
        let rendered = render(
            generated,
            &["# mine\nuser admin on >x +@all ~*".into()],
            SETINFO,
            |v| (v == "A_PASSWORD").then(|| "old\nnew\n".to_owned()),
        )
        .unwrap();
        assert_eq!(
            rendered,
            format!(
                "user a on #{} #{} ~k:* -@all +get\nuser admin on >x +@all ~*\n",
                sha256_hex("old"),
                sha256_hex("new")
            )
        );
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    /// With every queue trimmed by the CronJob (as the operator), no worker
    /// may XTRIM: it could empty a ready or dead-letter stream.
    #[test]
    fn the_worker_may_xtrim_only_where_workers_trim() {
        let mut spec = spec();
        assert!(rules(&spec, Role::Worker, ServerCommands::ALL).contains(&"+xtrim".to_owned()));
        for queue in &mut spec.queues {
            queue.retention.trim = TrimMode::CronJob;
        }
        assert!(!rules(&spec, Role::Worker, ServerCommands::ALL).contains(&"+xtrim".to_owned()));
        assert!(rules(&spec, Role::Operator, ServerCommands::ALL).contains(&"+xtrim".to_owned()));
    }

    const SETINFO: ServerCommands = ServerCommands {
        client_setinfo: true,
        xackdel: true,
    };

    /// Redis 7.0 refuses a file naming `client|setinfo`; 7.2+ needs the rule.
    #[test]
    fn render_keeps_client_setinfo_only_for_a_server_that_has_it() {
        let generated = "user a on nopass -@all +ping +client|setinfo +get\n";
        let without = ServerCommands {
            client_setinfo: false,
            xackdel: true,
        };
        assert_eq!(
            render(generated, &[], without, |_| None).unwrap(),
            "user a on nopass -@all +ping +get\n"
        );
        assert_eq!(
            render(generated, &[], SETINFO, |_| None).unwrap(),
            generated
        );
        let file = generate(&spec(), "../queues.yaml").unwrap().contents;
        for line in file
            .lines()
            .filter(|l| l.starts_with("user ") && !l.contains(" off "))
        {
            assert!(line.contains(" +client|setinfo "), "{line}");
        }
    }

    #[test]
    fn render_names_the_missing_or_empty_variable_and_its_line() {
        let generated = "# h\nuser a on #<sha256:A_PASSWORD> +get\n";
        assert_eq!(
            render(generated, &[], SETINFO, |_| None),
            Err(RenderError::MissingPassword {
                line: 2,
                variable: "A_PASSWORD".into()
            })
        );
        assert_eq!(
            render(generated, &[], SETINFO, |_| Some("\n".into())),
            Err(RenderError::EmptyPassword {
                line: 2,
                variable: "A_PASSWORD".into()
            })
        );
        assert_eq!(
            render("user a on #<sha256:A +get", &[], SETINFO, |_| None),
            Err(RenderError::BadPlaceholder {
                line: 1,
                text: "#<sha256:A".into()
            })
        );
    }
}
