"""The pages' logic without widgets: each module is what one page computes, testable without Streamlit."""
