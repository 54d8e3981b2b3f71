//! Pieces more than one page draws the same way: labelled inputs with their errors, and
//! tables. Plain components: whichever island renders one carries it to the browser.

pub mod field;
pub mod table;
