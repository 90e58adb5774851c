//! The `neardup` command line: a thin layer over the library (its `cli` module).

fn main() {
    std::process::exit(neardup::cli::main());
}
