//! The versioned Redis Function library of a service (retry, dead letter, replay).

/// Version of the generated library's code. Bump it whenever the library's
/// text changes: function names carry it, so two versions load side by side.
pub const LIBRARY_VERSION: u32 = 1;

/// `qg_<service>_v<N>`: the library name, and the prefix of every function name.
pub fn library_name(service: &str) -> String {
    format!("qg_{}_v{LIBRARY_VERSION}", service.replace('-', "_"))
}
