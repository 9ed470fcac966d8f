// Exec output capture lives in shared/ (the resident agent captures exec output the same way);
// providers import it from here.
export { OutputCapture } from '../../shared/output-capture.js';
