CREATE TABLE department (
    dept_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    building TEXT NOT NULL,
    budget INTEGER NOT NULL,
    founded_year INTEGER NOT NULL
);
CREATE TABLE professor (
    prof_id INTEGER PRIMARY KEY,
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    dept_id INTEGER NOT NULL REFERENCES department (dept_id),
    rank TEXT NOT NULL,
    hire_date TEXT NOT NULL,
    salary INTEGER NOT NULL,
    email TEXT NOT NULL UNIQUE
);
CREATE TABLE course (
    course_id INTEGER PRIMARY KEY,
    code TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL UNIQUE,
    dept_id INTEGER NOT NULL REFERENCES department (dept_id),
    prof_id INTEGER REFERENCES professor (prof_id),
    credits INTEGER NOT NULL,
    level INTEGER NOT NULL
);
CREATE TABLE student (
    student_id INTEGER PRIMARY KEY,
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    major_dept_id INTEGER NOT NULL REFERENCES department (dept_id),
    enrollment_year INTEGER NOT NULL,
    birth_date TEXT NOT NULL,
    home_city TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE
);
CREATE TABLE enrollment (
    student_id INTEGER NOT NULL REFERENCES student (student_id),
    course_id INTEGER NOT NULL REFERENCES course (course_id),
    term TEXT NOT NULL,
    year INTEGER NOT NULL,
    score INTEGER NOT NULL,
    grade TEXT NOT NULL,
    PRIMARY KEY (student_id, course_id)
);
CREATE INDEX ix_professor_dept ON professor (dept_id);
CREATE INDEX ix_course_dept ON course (dept_id);
CREATE INDEX ix_course_prof ON course (prof_id);
CREATE INDEX ix_student_major ON student (major_dept_id);
CREATE INDEX ix_enrollment_course ON enrollment (course_id);
