//! Whether the service's Function library is loaded: the check a worker makes before it starts, and `queuegen apply` after it loads.

use crate::connect::{Node, Redis};
use crate::error::{Error, LibraryProblem, Result, SetupError};

use super::{command, is_function_not_found, Function, Version};

/// Checks that every primary has `library` loaded: `FCALL_RO <library>_version 0`
/// on each must answer the library's own name. A primary without it (or
/// answering another name) is [`SetupError::LibraryMissing`], naming every such
/// primary and the library.
pub async fn verify_library(redis: &Redis, library: &str) -> Result<()> {
    let mut servers = Vec::new();
    let mut first_problem = None;
    for node in redis.primaries().await? {
        if let Some(problem) = library_problem_on(&node, library).await? {
            servers.push(node.addr());
            first_problem.get_or_insert(problem);
        }
    }
    match first_problem {
        None => Ok(()),
        Some(problem) => Err(Error::Setup(SetupError::LibraryMissing {
            server: servers.join(", "),
            library: library.to_owned(),
            problem,
        })),
    }
}

/// Why `node` lacks `library`, or `None` when it has it.
async fn library_problem_on(node: &Node, library: &str) -> Result<Option<LibraryProblem>> {
    let function = Function::Version.in_library(library);
    let mut conn = node.connection().await?;
    let reply: redis::RedisResult<String> =
        command(&function, &Version).query_async(&mut conn).await;
    match reply {
        Ok(name) if name == library => Ok(None),
        Ok(name) => Ok(Some(LibraryProblem::OtherName {
            function: function.to_string(),
            name,
        })),
        Err(err) if is_function_not_found(&err) => Ok(Some(LibraryProblem::NoFunction {
            function: function.to_string(),
        })),
        Err(err) => Err(Error::redis(
            format!("FCALL_RO {function} 0 on {}", node.addr()),
            err,
        )),
    }
}
