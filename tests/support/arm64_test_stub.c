/* main of a test tier in the arm64 cross build: the tier itself is
   lib<tier>_body.so, BTI- and PAC-marked (cmake/BulwarkTest.cmake). */
int bulwark_test_main(int argc, char** argv);

int main(int argc, char** argv) { return bulwark_test_main(argc, argv); }
