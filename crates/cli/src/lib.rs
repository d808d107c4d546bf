//! The front end shared by the `schedlab` command and the Python package: resolving what a user names
//! ([`resolve`]), runs and comparisons made the way the command makes them ([`api`]), the comparison
//! table ([`compare`]), the HTML report ([`report_html`]), sweeps over a grid ([`sweep`]) and the
//! metric expressions of grids and experiments ([`metric`]).

#![warn(missing_docs)]

pub mod api;
pub mod compare;
pub mod metric;
pub mod report_figures;
pub mod report_gantt;
pub mod report_html;
pub mod report_policy;
pub mod report_summary;
pub mod report_vega;
pub mod resolve;
pub mod sweep;
