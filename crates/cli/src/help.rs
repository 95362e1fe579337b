//! Every subcommand and flag of a command line says what it is for: the
//! check both binaries' tests make of their own.

/// The subcommands and flags of `command` (and below) without help text.
pub fn missing(command: &clap::Command) -> Vec<String> {
    fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
        let path = format!("{path} {}", command.get_name());
        if command.get_about().is_none() {
            missing.push(path.clone());
        }
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            if id != "help" && id != "version" && arg.get_help().is_none() {
                missing.push(format!("{path} --{id}"));
            }
        }
        for sub in command.get_subcommands() {
            walk(sub, &path, missing);
        }
    }
    let mut missing = Vec::new();
    walk(command, "", &mut missing);
    missing
}
