//! numaplace's reads of files a user names, kept out of the pure model
//! crate: `bounded` opens regular files only and caps what it reads per
//! kind of file. Std only; every crate that reads such a file depends on
//! this one.

pub mod bounded;
